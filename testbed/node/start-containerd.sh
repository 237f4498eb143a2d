#!/usr/bin/env bash
# Start containerd 2.x (scratch build) in the background; pid in state/containerd.pid, log in logs/containerd.log.
set -euo pipefail
d=/work/scratch/node
export PATH=$d/bin:$PATH   # containerd-shim-runc-v2 is looked up in PATH
sock=$d/state/containerd/containerd.sock
if [ -f $d/state/containerd.pid ] && kill -0 "$(cat $d/state/containerd.pid)" 2>/dev/null; then echo "already running"; exit 0; fi
nohup $d/bin/containerd --config ${CONTAINERD_CONFIG:-$d/containerd.v4.toml} >> $d/logs/containerd.log 2>&1 &
echo $! > $d/state/containerd.pid
for i in $(seq 50); do [ -S $sock ] && $d/bin/ctr --address $sock version >/dev/null 2>&1 && break; sleep 0.2; done
$d/bin/ctr --address $sock version
