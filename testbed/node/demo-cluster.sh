#!/usr/bin/env bash
# End to end: containerd (v4 config) -> private control plane -> kubelet registers -> helm install the operator chart.
# Assumes the images are already in containerd (make-pause.sh / build-operator.sh imported them). Undo with stop-all.sh.
set -euo pipefail
d=/work/scratch/node; export KUBECONFIG=$d/cp/admin.kubeconfig
K=$HOME/.cache/kpo/kubernetes-1.34.4/bin/kubectl; H=$HOME/.cache/kpo/helm-3.21.4/bin/helm
t0=$(date +%s)
$d/start-containerd.sh >/dev/null
[ -f $d/cp/pki/ca.key ] || $d/cp-pki.sh >/dev/null
$d/cp-start.sh
$d/start-kubelet-cluster.sh
$K wait --for=condition=Ready node/scratch-node --timeout=60s
echo "== node Ready after $(( $(date +%s) - t0 ))s"
$K create namespace kpo-system --dry-run=client -o yaml | $K apply -f - >/dev/null
$H upgrade --install kpo $d/src/helm/kpo -n kpo-system -f $d/helm-values.yaml >/dev/null
$K -n kpo-system rollout status deploy/kpo --timeout=120s
echo "== operator Ready after $(( $(date +%s) - t0 ))s"
$K -n kpo-system get pods -o wide
