#!/usr/bin/env bash
# Build the operator image from a clean snapshot (git archive HEAD of /work/main, extracted to src/) with buildah,
# on the local debootstrap base, and import it into containerd's k8s.io namespace.
set -euo pipefail
. /work/scratch/node/env.sh
d=/work/scratch/node; tag=${TAG:-0.1.0}
start=$(date +%s)
nice -n 10 buildah bud --isolation=chroot --network=host --layers \
  -v /etc/pip.conf:/etc/pip.conf:ro -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
  --build-arg PYTHON_IMAGE=localhost/debian-python:bookworm --target operator -t localhost/kpo/operator:$tag \
  -f $d/src/Dockerfile $d/src
echo "== bud took $(( $(date +%s) - start ))s"; start=$(date +%s)
rm -f $d/state/operator.oci.tar
buildah push --disable-compression localhost/kpo/operator:$tag oci-archive:$d/state/operator.oci.tar:localhost/kpo/operator:$tag
$d/bin/ctr --address $d/state/containerd/containerd.sock -n k8s.io images import $d/state/operator.oci.tar
echo "== push+import took $(( $(date +%s) - start ))s"
