#!/usr/bin/env bash
# pause image from kubernetes' own build/pause/linux/pause.c (in the k8s.io/kubernetes module zip), static, FROM scratch.
set -euo pipefail
. /work/scratch/node/env.sh
d=/work/scratch/node/pause
TAG=${PAUSE_TAG:-3.10.1}
src=$HOME/.cache/kpo/go/mod/k8s.io/kubernetes@v1.34.4/build/pause/linux/pause.c
cp "$src" "$d/pause.c"
gcc -Os -Wall -Werror -static -DVERSION="v$TAG-local" -o "$d/pause" "$d/pause.c"
strip "$d/pause"
c=$(buildah from scratch)
buildah copy "$c" "$d/pause" /pause
buildah config --entrypoint '["/pause"]' --user 65535:65535 --os linux --arch amd64 "$c"
buildah commit --rm "$c" localhost/k8s/pause:$TAG
rm -f "$d/pause.oci.tar"
buildah push localhost/k8s/pause:$TAG oci-archive:"$d/pause.oci.tar":registry.k8s.io/pause:$TAG
ls -la "$d"
