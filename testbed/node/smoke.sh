#!/usr/bin/env bash
# By hand, on a test bed with a node (node.sh up): helm install the chart with the locally built operator image, wait
# for the operator pod to be Ready under the chart's ServiceAccount, carry a PartitionReassignment to Succeeded on the
# test bed's Kafka, then uninstall. The first step of issue 14's e2e tests, before they join make test.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bed=${KPO_TESTBED_DIR:-$repo/.testbed}
# shellcheck source=/dev/null
. "$bed/env"
cache=${KPO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kpo}
archive=$(ls -t "$cache"/images/operator-*.oci.tar | head -1)
tag=$(basename "$archive" .oci.tar); tag=${tag#operator-}
ns=kpo-node-smoke
topic=node-smoke-$RANDOM
port=${KPO_KUBE_SERVER##*:}
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 ))s"; }

cat > "$bed/node/smoke-values.yaml" <<EOF
image: {repository: localhost/kpo/operator, tag: "$tag", pullPolicy: Never}
hostNetwork: true
watchNamespaces: [$ns]
kafka: {clusters: {default: {bootstrapServers: "$KPO_BOOTSTRAP_SERVERS"}}}
operator:
  pollIntervalSeconds: 1
  extraEnv:
    # No kube-proxy on the test bed's node: the API server is reached where it listens, on loopback.
    - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
    - {name: KUBERNETES_SERVICE_PORT, value: "$port"}
EOF
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
helm upgrade --install kpo "$repo/helm/kpo" -n "$ns" -f "$bed/node/smoke-values.yaml" >/dev/null
kubectl -n "$ns" rollout status deploy/kpo --timeout=180s
echo "== operator pod Ready after $(elapsed)"
kubectl -n "$ns" get pods -o wide

"$repo/.venv/bin/python" - "$topic" <<'EOF'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
import os
admin = AdminClient({"bootstrap.servers": os.environ["KPO_BOOTSTRAP_SERVERS"]})
admin.create_topics([NewTopic(sys.argv[1], num_partitions=2, replica_assignment=[[1, 2], [2, 3]])])[sys.argv[1]].result(30)
EOF
kubectl -n "$ns" apply -f - <<EOF
apiVersion: kpo.dev/v1alpha1
kind: PartitionReassignment
metadata: {name: smoke}
spec:
  partitions:
    - {topic: $topic, partition: 0, replicas: [3, 1]}
    - {topic: $topic, partition: 1, replicas: [1, 3]}
EOF
kubectl -n "$ns" wait --for=condition=Ready partitionreassignment/smoke --timeout=180s
echo "== PartitionReassignment Succeeded after $(elapsed)"
kubectl -n "$ns" get partitionreassignment smoke
ps -o user,pid,args -C python | grep "[-]m kpo" || true  # the operator, as uid 10001, on this host
helm uninstall kpo -n "$ns" >/dev/null
kubectl delete namespace "$ns" --wait=false >/dev/null
