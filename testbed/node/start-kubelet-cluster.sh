#!/usr/bin/env bash
# kubelet registering node "scratch-node" with the PRIVATE apiserver of cp-start.sh (client cert from its CA).
set -euo pipefail
d=/work/scratch/node
if [ -f $d/state/kubelet.pid ] && kill -0 "$(cat $d/state/kubelet.pid)" 2>/dev/null; then echo "already running"; exit 0; fi
export PATH=$d/bin:$PATH
nohup $d/bin/kubelet --config $d/kubelet-cluster.yaml --kubeconfig $d/cp/kubelet.kubeconfig \
  --root-dir $d/state/kubelet --cert-dir $d/state/kubelet/pki-cluster \
  --hostname-override scratch-node --node-ip 10.244.77.1 --v 2 >> $d/logs/kubelet-cluster.log 2>&1 &
echo $! > $d/state/kubelet.pid
for i in $(seq 60); do curl -fsS http://127.0.0.1:10348/healthz >/dev/null 2>&1 && { echo "kubelet healthz after ${i}x0.5s"; exit 0; }; sleep 0.5; done
echo "kubelet not healthy after 30s" >&2; exit 1
