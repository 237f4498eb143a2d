#!/usr/bin/env bash
# Debian bookworm minbase rootfs with Python 3.11, then import it into buildah's store as localhost/debian-python:bookworm.
set -euo pipefail
. /work/scratch/node/env.sh
root=/work/scratch/node/rootfs
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ ! -x "$root/usr/bin/python3" ]; then
  rm -rf "$root"
  start=$(date +%s)
  nice -n 10 debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates bookworm "$root" "$mirror"
  echo "== debootstrap took $(( $(date +%s) - start ))s"
  # the image's apt must see bookworm-updates and security too (like the python:slim image)
  cat > "$root/etc/apt/sources.list" <<SRC
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SRC
  # keep the image small: no apt lists, no caches, no docs
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* "$root"/usr/share/man/* \
         "$root"/usr/share/locale/* "$root"/var/log/*.log
fi
# the python:slim images have a `python` command (the Dockerfile runs `python -m venv`): python-is-python3 gives it
[ -e "$root/usr/bin/python" ] || ln -s python3 "$root/usr/bin/python"
du -sh "$root"
start=$(date +%s)
c=$(buildah from scratch)
mnt=$(buildah mount "$c")
cp -a "$root"/. "$mnt"/
buildah umount "$c"
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
  --cmd '["python3"]' --os linux --arch amd64 "$c"
buildah commit --rm "$c" localhost/debian-python:bookworm
echo "== buildah import took $(( $(date +%s) - start ))s"
buildah images
