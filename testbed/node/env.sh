# source me: keeps buildah's image store under /work/scratch/node/state instead of /var/lib/containers
export CONTAINERS_STORAGE_CONF=/work/scratch/node/storage.conf
export BUILDAH_ISOLATION=chroot
export PATH=/work/scratch/node/bin:$PATH
