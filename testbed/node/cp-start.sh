#!/usr/bin/env bash
# PRIVATE control plane for the kubelet registration experiment: etcd + kube-apiserver + kube-controller-manager
# (binaries the project's provision.sh cached in ~/.cache/kpo, used read-only) + kube-scheduler (built here).
# apiserver listens on the CNI bridge's gateway IP so pods on the bridge can reach it without kube-proxy.
set -euo pipefail
d=/work/scratch/node; cp=$d/cp; p=$cp/pki; k8s=$HOME/.cache/kpo/kubernetes-1.34.4/bin
API_IP=10.244.77.1; API_PORT=16443
if ! ip link show kposcr0 >/dev/null 2>&1; then
  ip link add kposcr0 type bridge; ip addr add $API_IP/24 dev kposcr0; ip link set kposcr0 up
fi
start() { name=$1; shift; nohup "$@" >> $d/logs/cp-$name.log 2>&1 & echo $! > $d/state/cp-$name.pid; }
start etcd $HOME/.cache/kpo/etcd-3.6.16/bin/etcd --name scratch --data-dir $cp/etcd \
  --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
  --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
  --initial-cluster scratch=http://127.0.0.1:12380 --unsafe-no-fsync --log-level warn
sleep 2
start apiserver $k8s/kube-apiserver --etcd-servers=http://127.0.0.1:12379 \
  --bind-address=$API_IP --advertise-address=$API_IP --secure-port=$API_PORT \
  --tls-cert-file=$p/apiserver.crt --tls-private-key-file=$p/apiserver.key --client-ca-file=$p/ca.crt \
  --token-auth-file=$p/tokens.csv --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file=$p/sa.pub --service-account-signing-key-file=$p/sa.key \
  --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
  --kubelet-client-certificate=$p/apiserver-kubelet-client.crt --kubelet-client-key=$p/apiserver-kubelet-client.key \
  --kubelet-certificate-authority= --kubelet-preferred-address-types=InternalIP,Hostname \
  --enable-priority-and-fairness=false --profiling=false --cert-dir=$cp/apiserver-certs
for i in $(seq 120); do curl -fsS --cacert $p/ca.crt https://$API_IP:$API_PORT/readyz >/dev/null 2>&1 && break; sleep 0.5; done
echo "apiserver ready after ~$((i/2))s"
kc=$cp/admin.kubeconfig
start kcm $k8s/kube-controller-manager --kubeconfig=$kc --authentication-kubeconfig=$kc --authorization-kubeconfig=$kc \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port=10357 --cert-dir=$cp/kcm-certs \
  --root-ca-file=$p/ca.crt --service-account-private-key-file=$p/sa.key \
  --cluster-signing-cert-file=$p/ca.crt --cluster-signing-key-file=$p/ca.key --profiling=false
start scheduler $d/bin/kube-scheduler --kubeconfig=$kc --authentication-kubeconfig=$kc --authorization-kubeconfig=$kc \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port=10359 --profiling=false
