#!/usr/bin/env bash
# Start kubelet v1.34.4 in standalone mode (no --kubeconfig): runs the static pods in manifests/.
set -euo pipefail
d=/work/scratch/node
if [ -f $d/state/kubelet.pid ] && kill -0 "$(cat $d/state/kubelet.pid)" 2>/dev/null; then echo "already running"; exit 0; fi
export PATH=$d/bin:$PATH
nohup $d/bin/kubelet --config $d/kubelet.yaml --root-dir $d/state/kubelet --cert-dir $d/state/kubelet/pki \
  --hostname-override scratch-node --v 2 >> $d/logs/kubelet.log 2>&1 &
echo $! > $d/state/kubelet.pid
for i in $(seq 60); do curl -fsS http://127.0.0.1:10348/healthz 2>/dev/null && { echo " kubelet healthz after ${i}x0.5s"; exit 0; }; sleep 0.5; done
echo "kubelet not healthy after 30s; see $d/logs/kubelet.log" >&2; exit 1
