#!/usr/bin/env bash
# Attach a real node to the running test bed (the e2e tests do this through kpo_testbed.node):
#
#   testbed/node/node.sh up     containerd + kubelet (node "kpo-node"), kube-scheduler, and a second
#                               kube-controller-manager for Deployments/ReplicaSets, all on the test bed's API server
#   testbed/node/node.sh down   stop them by recorded pid and undo what they left on the host
#
# Needs `testbed/provision.sh node` (binaries and images in the cache), a test bed that is up (.testbed/env), and
# Debian's runc, containernetworking-plugins and iptables. The kubelet authenticates with a client certificate signed
# by the test bed's CA (CN system:node:kpo-node, O system:nodes); RBAC binds the built-in system:node role to it (the
# Node authorizer is not on). Pods live on a bridge (kpobr0, 10.244.78.0/24) and reach the API server and Kafka through
# the node's address, forwarded to loopback (forward, below): no pod needs the host network. CoreDNS is the cluster
# DNS: pods resolve kubernetes.default.svc and every Service by name, as in a real cluster.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../versions.env
. "$repo/testbed/versions.env"
cache=${KPO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kpo}
bin=$cache/node-$KUBERNETES_VERSION-containerd-$CONTAINERD_VERSION/bin
bed=${KPO_TESTBED_DIR:-$repo/.testbed}
d=$bed/node
pki=$bed/data/kube/pki
NODE=kpo-node
# The node's address: the pod bridge's gateway (kubelet refuses a loopback node IP); made before the first pod is.
NODE_IP=10.244.78.1
KUBERNETES_SERVICE_IP=10.0.0.1  # the first address of the API server's --service-cluster-ip-range
# Cluster DNS: the kube-dns Service's address (reserved below, as kubeadm does) is what the kubelet writes into pods'
# resolv.conf; CoreDNS listens on loopback and DNS to that address is forwarded there (forward, below).
DNS_SERVICE_IP=10.0.0.10
DNS_PORT=10053
coredns=$cache/coredns-$COREDNS_VERSION/bin/coredns
sock=$d/containerd/containerd.sock
kubectl=$cache/kubernetes-$KUBERNETES_VERSION/bin/kubectl
K() { "$kubectl" --kubeconfig "$bed/data/kube/admin.kubeconfig" "$@"; }
die() { echo "node: $*" >&2; exit 1; }
log() { echo "node: $*" >&2; }

alive() { [ -f "$d/$1.pid" ] && kill -0 "$(cat "$d/$1.pid")" 2>/dev/null; }
start() { # name argv...: in the background, pid and log under the node's directory
  local name=$1; shift
  alive "$name" && return 0
  nohup "$@" >> "$d/$name.log" 2>&1 &
  echo $! > "$d/$name.pid"
}
stop() { # name: SIGTERM, SIGKILL after 20 s
  alive "$1" || { rm -f "$d/$1.pid"; return 0; }
  local pid; pid=$(cat "$d/$1.pid"); kill "$pid"
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$d/$1.pid"
}

write_config() {
  mkdir -p "$d/cni/net.d" "$d/pki" "$d/manifests"
  sed -e "s#@NODE_DIR@#$d#g" "$here/containerd.toml.in" > "$d/containerd.toml"
  cat > "$d/cni/net.d/10-kpo-bridge.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "kpo-bridge", "plugins": [
  {"type": "bridge", "bridge": "kpobr0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.78.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$d/cni-ipam"}},
  {"type": "loopback"}]}
EOF
  sed -e "s#@NODE_DIR@#$d#g" -e "s#@NODE_IP@#$NODE_IP#g" -e "s#@CA_FILE@#$pki/ca.crt#g" \
    -e "s#@DNS_SERVICE_IP@#$DNS_SERVICE_IP#g" "$here/kubelet.yaml.in" > "$d/kubelet.yaml"
  # Service and pod names of cluster.local from the API server; other names from the host's resolver.
  cat > "$d/Corefile" <<EOF
.:$DNS_PORT {
  bind 127.0.0.1
  errors
  cache 30
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig $bed/data/kube/admin.kubeconfig
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
  }
  forward . /etc/resolv.conf
}
EOF
  if [ ! -f "$d/pki/kubelet.crt" ]; then
    (cd "$d/pki" && openssl req -newkey rsa:2048 -nodes -keyout kubelet.key -out kubelet.csr \
        -subj "/O=system:nodes/CN=system:node:$NODE" >/dev/null 2>&1 \
      && openssl x509 -req -in kubelet.csr -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -out kubelet.crt -days 3650 >/dev/null 2>&1)
  fi
  local server; server=$(K config view -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$d/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: kpo-testbed, cluster: {server: "$server", certificate-authority: $pki/ca.crt}}]
users: [{name: kubelet, user: {client-certificate: $d/pki/kubelet.crt, client-key: $d/pki/kubelet.key}}]
contexts: [{name: kubelet, context: {cluster: kpo-testbed, user: kubelet}}]
current-context: kubelet
EOF
}

# What kube-proxy would do for the one Service pods need, and what lets pods reach the test bed at all: everything the
# test bed serves listens on loopback, so TCP from the pod bridge to the node's address, or to the "kubernetes"
# Service's ClusterIP, is sent to loopback (route_localnet lets the kernel route it there). Kafka's PODS listener
# advertises the node's address for this. Nothing outside this host is involved.
forward() {  # add|del

  [ "$1" = add ] && sysctl -q -w net.ipv4.conf.kpobr0.route_localnet=1
  local port; port=$(K config view -o jsonpath='{.clusters[0].cluster.server}'); port=${port##*:}
  local rules=(
    "-i kpobr0 -p tcp -d $KUBERNETES_SERVICE_IP --dport 443 -j DNAT --to-destination 127.0.0.1:$port"
    "-i kpobr0 -p udp -d $DNS_SERVICE_IP --dport 53 -j DNAT --to-destination 127.0.0.1:$DNS_PORT"
    "-i kpobr0 -p tcp -d $DNS_SERVICE_IP --dport 53 -j DNAT --to-destination 127.0.0.1:$DNS_PORT"
    "-i kpobr0 -p tcp -d $NODE_IP -j DNAT --to-destination 127.0.0.1"
  )
  local rule
  if [ "$1" = add ]; then
    # The bridge is this node's alone (one per host): a rule on it that is still there was left by a node whose `down`
    # never ran (its session killed), and would send this node's pods to that bed's API server port first.
    iptables -t nat -S PREROUTING | { grep -e '-i kpobr0 ' || true; } | sed 's/^-A /-D /' | while read -r rule; do
      # shellcheck disable=SC2086
      iptables -t nat $rule
    done
  fi
  for rule in "${rules[@]}"; do
    # shellcheck disable=SC2086
    if [ "$1" = add ]; then
      iptables -t nat -C PREROUTING $rule 2>/dev/null || iptables -t nat -A PREROUTING $rule
    else
      while iptables -t nat -C PREROUTING $rule 2>/dev/null; do iptables -t nat -D PREROUTING $rule; done
    fi
  done
}

up() {
  [ -x "$bin/kubelet" ] || die "run testbed/provision.sh node first"
  [ -x "$coredns" ] || die "CoreDNS is missing: run testbed/provision.sh node (or coredns)"
  [ -x /usr/sbin/runc ] || die "runc is missing (Debian: apt-get install runc)"
  [ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing (Debian: apt-get install containernetworking-plugins)"
  command -v iptables >/dev/null || die "iptables is missing (Debian: apt-get install iptables)"
  [ -f "$bed/data/kube/admin.kubeconfig" ] || die "the test bed is not up (make testbed-up)"
  export PATH=$bin:$PATH  # containerd finds its runc shim on PATH
  write_config
  if ! ip link show kpobr0 >/dev/null 2>&1; then
    ip link add kpobr0 type bridge && ip addr add "$NODE_IP/24" dev kpobr0 && ip link set kpobr0 up
  fi
  forward add
  # The Node authorizer is not on: the node's identity gets the built-in system:node role through RBAC instead.
  K create clusterrolebinding kpo-node --clusterrole=system:node --group=system:nodes --dry-run=client -o yaml \
    | K apply -f - >/dev/null
  start containerd "$bin/containerd" --config "$d/containerd.toml"
  for _ in $(seq 50); do "$bin/ctr" --address "$sock" version >/dev/null 2>&1 && break; sleep 0.2; done
  local archive
  for archive in "$cache"/images/*.oci.tar; do
    "$bin/ctr" --address "$sock" -n k8s.io images import "$archive" >/dev/null
  done
  local kc=$bed/data/kube/admin.kubeconfig
  # The kube-dns Service holds DNS_SERVICE_IP, so the API server never gives it to another Service.
  K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_SERVICE_IP
  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
EOF
  start coredns "$coredns" -conf "$d/Corefile"
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$kc" --authentication-kubeconfig="$kc" \
    --authorization-kubeconfig="$kc" --leader-elect=false --bind-address=127.0.0.1 --secure-port=0
  local kcm=$cache/kubernetes-$KUBERNETES_VERSION/bin/kube-controller-manager
  start kube-controller-manager-workloads "$kcm" --kubeconfig="$kc" --authentication-kubeconfig="$kc" \
    --authorization-kubeconfig="$kc" --controllers=deployment,replicaset,root-ca-cert-publisher,node-lifecycle-controller \
    --root-ca-file="$pki/ca.crt" --leader-elect=false --bind-address=127.0.0.1 --secure-port=0
  start kubelet "$bin/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
    --root-dir "$d/kubelet" --cert-dir "$d/kubelet/pki" --hostname-override "$NODE" --node-ip "$NODE_IP"
  for _ in $(seq 60); do K get node "$NODE" >/dev/null 2>&1 && break; sleep 0.5; done
  K wait --for=condition=Ready "node/$NODE" --timeout=90s >/dev/null || die "node $NODE not Ready (see $d/kubelet.log)"
  log "node $NODE Ready; images: $(ls "$cache"/images/*.oci.tar | xargs -n1 basename | tr '\n' ' ')"
}

down() {
  if alive kubelet; then
    K delete deployment,replicaset,pod --all -A --grace-period=1 --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 60); do
      [ "$("$bin/ctr" --address "$sock" -n k8s.io tasks ls -q 2>/dev/null | wc -l)" = 0 ] && break; sleep 1
    done
  fi
  stop kubelet
  stop coredns
  stop kube-controller-manager-workloads
  stop kube-scheduler
  if alive containerd; then
    local t c
    for t in $("$bin/ctr" --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      "$bin/ctr" --address "$sock" -n k8s.io tasks kill -s SIGKILL "$t" 2>/dev/null || true
      sleep 0.5; "$bin/ctr" --address "$sock" -n k8s.io tasks delete "$t" 2>/dev/null || true
    done
    for c in $("$bin/ctr" --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
      "$bin/ctr" --address "$sock" -n k8s.io containers delete "$c" 2>/dev/null || true
    done
  fi
  stop containerd
  # What pods leave on the host: mounts under the node's directory, CNI network namespaces, the bridge, cgroups.
  # (No mount left, e.g. containerd gone first: grep finds nothing, which pipefail must not take for a failure.)
  { grep -o " $d/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  local ns ctl
  for ns in /run/netns/cni-*; do [ -e "$ns" ] && { umount "$ns" 2>/dev/null; rm -f "$ns"; }; done
  [ -f "$bed/data/kube/admin.kubeconfig" ] && forward del
  ip link show kpobr0 >/dev/null 2>&1 && ip link del kpobr0
  for ctl in /sys/fs/cgroup/*/; do
    [ -d "$ctl/kubepods" ] && find "$ctl/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  K delete node "$NODE" --wait=false >/dev/null 2>&1 || true
  rm -rf "$d"
  log "node stopped"
}

case "${1:-}" in
  up) mkdir -p "$d"; up ;;
  down) down ;;
  *) die "usage: node.sh up|down" ;;
esac
