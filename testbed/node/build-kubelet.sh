#!/usr/bin/env bash
# Build kubelet v1.34.4 the way testbed/provision.sh builds kube-apiserver: a wrapper module pinning the staging
# modules to v0.34.4, then `go build k8s.io/kubernetes/cmd/kubelet`.
set -euo pipefail
V=${KUBERNETES_VERSION:-1.34.4}
here=/work/scratch/node/go/kubelet
out=/work/scratch/node/bin
export GOMODCACHE=$HOME/.cache/kpo/go/mod GOCACHE=$HOME/.cache/kpo/go/build
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local GOMAXPROCS=${GOMAXPROCS:-1}
minor=${V#*.}; minor=${minor%%.*}; staging="0.$minor.${V##*.}"
work=$(mktemp -d /work/scratch/node/go/kubelet-build.XXXX)
sed -e "s/@KUBERNETES_VERSION@/v$V/g" -e "s/@STAGING_VERSION@/v$staging/g" "$here/go.mod.in" > "$work/go.mod"
cp "$here/main.go" "$here/go.sum" "$work/"
start=$(date +%s)
(cd "$work" && go mod download k8s.io/kubernetes >/dev/null && go mod tidy >/dev/null)
echo "== mod download+tidy took $(( $(date +%s) - start ))s"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=v$V -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
for b in ${BINS:-kubelet}; do
  start=$(date +%s)
  (cd "$work" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$out/$b" "k8s.io/kubernetes/cmd/$b")
  echo "== go build $b took $(( $(date +%s) - start ))s"
done
if ! diff -q "$work/go.sum" "$here/go.sum" >/dev/null; then cp "$work/go.sum" "$here/go.sum.new"; echo "== go.sum changed (go.sum.new)"; fi
rm -rf "$work"
ls -la "$out"
