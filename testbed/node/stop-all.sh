#!/usr/bin/env bash
# Tear down everything the scratch experiments started, by recorded pid only (never by name), and undo host changes.
set -uo pipefail
d=/work/scratch/node; S=$d/state/containerd/containerd.sock
K="$HOME/.cache/kpo/kubernetes-1.34.4/bin/kubectl --kubeconfig $d/cp/admin.kubeconfig"
alive() { [ -f $d/state/$1.pid ] && kill -0 "$(cat $d/state/$1.pid)" 2>/dev/null; }
stop() { # name: SIGTERM, wait up to 20 s, then SIGKILL
  alive $1 || { rm -f $d/state/$1.pid; return 0; }
  local p; p=$(cat $d/state/$1.pid); kill "$p"
  for i in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$p" 2>/dev/null && kill -9 "$p"; rm -f $d/state/$1.pid; echo "stopped $1 ($p)"
}
# 1. let kubelet stop its pods (so CNI DEL runs and sandboxes are torn down properly)
if alive kubelet; then
  if alive cp-apiserver; then
    $K delete deployment --all -A --wait=false 2>/dev/null; $HOME/.cache/kpo/helm-3.21.4/bin/helm --kubeconfig $d/cp/admin.kubeconfig uninstall kpo -n kpo-system 2>/dev/null
    $K delete pod --all -A --grace-period=1 --wait=false 2>/dev/null
  fi
  mkdir -p $d/manifests.off; mv $d/manifests/*.yaml $d/manifests.off/ 2>/dev/null
  for i in $(seq 60); do n=$($d/bin/ctr --address $S -n k8s.io tasks ls -q 2>/dev/null | wc -l); [ "$n" = 0 ] && break; sleep 1; done
  echo "tasks left after kubelet cleanup: $n"
fi
stop kubelet
for c in cp-scheduler cp-kcm cp-apiserver cp-etcd; do stop $c; done
# 2. whatever is still running in containerd: kill tasks, remove containers
if alive containerd; then
  for t in $($d/bin/ctr --address $S -n k8s.io tasks ls -q 2>/dev/null); do
    $d/bin/ctr --address $S -n k8s.io tasks kill -s SIGKILL $t 2>/dev/null; sleep 0.5; $d/bin/ctr --address $S -n k8s.io tasks delete $t 2>/dev/null; done
  for c in $($d/bin/ctr --address $S -n k8s.io containers ls -q 2>/dev/null); do $d/bin/ctr --address $S -n k8s.io containers delete $c 2>/dev/null; done
fi
stop containerd
# 3. host leftovers: mounts under state/, CNI netns, bridge, iptables chains kubelet made, ip_forward, cgroups
grep -o " $d/state/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
for ns in /run/netns/cni-*; do [ -e "$ns" ] && { umount "$ns" 2>/dev/null; rm -f "$ns"; }; done
ip link show kposcr0 >/dev/null 2>&1 && ip link del kposcr0
for ipt in iptables ip6tables; do
  $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null
  $ipt -F KUBE-FIREWALL 2>/dev/null; $ipt -X KUBE-FIREWALL 2>/dev/null
  for t in filter nat mangle; do $ipt -t $t -X KUBE-KUBELET-CANARY 2>/dev/null; $ipt -t $t -X KUBE-IPTABLES-HINT 2>/dev/null; done
done
[ -f $d/state/ip_forward.orig ] && cat $d/state/ip_forward.orig > /proc/sys/net/ipv4/ip_forward
for ctl in /sys/fs/cgroup/*/; do [ -d "$ctl/kubepods" ] && find "$ctl/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null; done
for ctl in /sys/fs/cgroup/*/; do [ -d "$ctl/scratchdbg" ] && find "$ctl/scratchdbg" -depth -type d -exec rmdir {} \; 2>/dev/null; done
[ -d /run/containerd ] && find /run/containerd -depth -type d -empty -delete 2>/dev/null   # shim socket/fifo dirs (empty after stop)
mv $d/manifests.off/*.yaml $d/manifests/ 2>/dev/null; rmdir $d/manifests.off 2>/dev/null
echo "left: mounts=$(grep -c " $d/state" /proc/mounts) netns=$(ls /run/netns 2>/dev/null | wc -l) kubepods-cgroups=$(ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null | wc -l) KUBE-chains=$(iptables-save 2>/dev/null | grep -c KUBE) ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)"
