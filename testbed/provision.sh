#!/usr/bin/env bash
# Provision the kpo test bed from the package registries: Kafka jars (Maven Central), etcd, kube-apiserver,
# kube-controller-manager, kubectl and helm (Go module proxy). Everything lands in a cache outside the repository,
# keyed by version, so a second run only checks that the binaries are there.
#
#   testbed/provision.sh [all|base|kafka|k8s|etcd|helm|prometheus|argocd|flux|node|coredns]
#
# `base` is Kafka, etcd, the Kubernetes control plane and helm (what `make demo` needs); `prometheus` is prometheus and
# promtool (the alert-rule tests and e2e/test_prometheus.py: `make test`, `make e2e`); `argocd` is argocd-health, kpo's
# Argo CD health check run in Argo CD's own Lua VM (e2e/argocd_support.py); `flux` is Flux's source-controller and
# kustomize-controller with their CRDs (e2e/test_flux.py); `all` adds `node`: containerd, kubelet and kube-scheduler,
# CoreDNS, the pause image, a Debian base image and kpo's
# operator and planner images built from the Dockerfile, for the test bed's real node (testbed/node/node.sh).
#
# Prints the cache root on success. Stops with a message naming the missing tool or unreachable registry otherwise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${KPO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kpo}
mkdir -p "$cache"
export GOMODCACHE=${GOMODCACHE_KPO:-$cache/go/mod} GOCACHE=${GOCACHE_KPO:-$cache/go/build}
export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
# Two cores: the linker of kube-apiserver alone wants ~2 GB; one package at a time keeps peak memory predictable.
export GOMAXPROCS=${GOMAXPROCS:-2}

die() { echo "provision: $*" >&2; exit 1; }
need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed; $2"
}
log() { echo "provision: $*" >&2; }

k8s_dir=$cache/kubernetes-$KUBERNETES_VERSION
etcd_dir=$cache/etcd-$ETCD_VERSION
helm_dir=$cache/helm-$HELM_VERSION
coredns_dir=$cache/coredns-$COREDNS_VERSION
prometheus_dir=$cache/prometheus-$PROMETHEUS_VERSION
argocd_dir=$cache/argocd-$ARGOCD_VERSION
flux_dir=$cache/flux-source-$FLUX_SOURCE_CONTROLLER_VERSION-kustomize-$FLUX_KUSTOMIZE_CONTROLLER_VERSION

go_registry_hint="the Go module proxy must be reachable (GOPROXY=$(go env GOPROXY 2>/dev/null || echo unset)); check the network or set GOPROXY"

# k8s.io/kubernetes replaces its staging modules with local paths, so `go install ...@v1.X` refuses it. A wrapper
# module (testbed/go/<wrapper>) that pins each staging module to the matching v0.X.Y release builds the real main
# packages unchanged: build_k8s <wrapper> <destination> <binary>...
build_k8s() {
  local wrapper=$1 dest=$2; shift 2
  need go "install Go >= 1.24 (https://go.dev/dl or Debian's golang package) and put it on PATH"
  local minor=${KUBERNETES_VERSION#*.}; minor=${minor%%.*}
  local staging="0.$minor.${KUBERNETES_VERSION##*.}"
  local work; work=$(mktemp -d "$cache/$wrapper-build.XXXX")
  sed -e "s/@KUBERNETES_VERSION@/v$KUBERNETES_VERSION/g" -e "s/@STAGING_VERSION@/v$staging/g" \
    "$here/go/$wrapper/go.mod.in" > "$work/go.mod"
  cp "$here/go/$wrapper/main.go" "$work/"
  [ -f "$here/go/$wrapper/go.sum" ] && cp "$here/go/$wrapper/go.sum" "$work/"
  (cd "$work" && go mod download k8s.io/kubernetes >/dev/null && go mod tidy >/dev/null) \
    || die "could not resolve k8s.io/kubernetes v$KUBERNETES_VERSION: $go_registry_hint"
  local ldflags="-s -w" pkg b
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$work/bin"
  for b in "$@"; do
    log "go build $b"
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "bin/$b" "k8s.io/kubernetes/cmd/$b") \
      || die "go build k8s.io/kubernetes/cmd/$b v$KUBERNETES_VERSION failed (see above)"
  done
  cp "$work/go.sum" "$here/go/$wrapper/go.sum" 2>/dev/null || true
  mkdir -p "$dest" && mv "$work"/bin/* "$dest"/ && rm -rf "$work"
}

provision_k8s() {
  local bins=(kube-apiserver kube-controller-manager kubectl)
  local b missing=0
  for b in "${bins[@]}"; do [ -x "$k8s_dir/bin/$b" ] || missing=1; done
  [ $missing = 0 ] && return 0
  log "building kube-apiserver, kube-controller-manager, kubectl v$KUBERNETES_VERSION (first time: about 6 minutes on 2 cores)"
  build_k8s k8s "$k8s_dir/bin" "${bins[@]}"
}

provision_etcd() {
  [ -x "$etcd_dir/bin/etcd" ] && return 0
  need go "install Go >= 1.24 and put it on PATH"
  local work; work=$(mktemp -d "$cache/etcd-build.XXXX")
  # etcd's server module carries replace directives too, so it is built from a wrapper module as well.
  sed -e "s/@ETCD_VERSION@/v$ETCD_VERSION/g" "$here/go/etcd/go.mod.in" > "$work/go.mod"
  cp "$here/go/etcd/main.go" "$work/"
  [ -f "$here/go/etcd/go.sum" ] && cp "$here/go/etcd/go.sum" "$work/"
  log "building etcd v$ETCD_VERSION"
  (cd "$work" && go mod tidy >/dev/null) || die "could not resolve go.etcd.io/etcd/server/v3 v$ETCD_VERSION: $go_registry_hint"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o bin/etcd go.etcd.io/etcd/server/v3) \
    || die "go build go.etcd.io/etcd/server/v3 v$ETCD_VERSION failed (see above)"
  cp "$work/go.sum" "$here/go/etcd/go.sum" 2>/dev/null || true
  mkdir -p "$etcd_dir" && rm -rf "$etcd_dir/bin" && mv "$work/bin" "$etcd_dir/bin" && rm -rf "$work"
}

provision_helm() {
  [ -x "$helm_dir/bin/helm" ] && return 0
  need go "install Go >= 1.24 and put it on PATH"
  log "building helm v$HELM_VERSION"
  GOBIN="$helm_dir/bin" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION" || die "go install helm.sh/helm/v3/cmd/helm@v$HELM_VERSION failed: $go_registry_hint"
}

# provision_kafka <version>: the Kafka server and tools jars of one release, in $cache/kafka-<version>/libs.
provision_kafka() {
  local version=$1 dir=$cache/kafka-$1
  [ -f "$dir/.complete" ] && return 0
  need java "install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)"
  need mvn "install Maven (Debian: apt-get install maven)"
  log "fetching Kafka $version jars from Maven Central"
  rm -rf "$dir" && mkdir -p "$dir/libs"
  mvn -B -q -f "$here/kafka/pom.xml" -Dkafka.version="$version" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir/libs" \
    || die "mvn could not fetch org.apache.kafka:kafka_2.13:$version: Maven Central must be reachable (check ~/.m2/settings.xml mirrors and proxies)"
  touch "$dir/.complete"
}

# Three Kafka releases: the bed's, the newest one kpo supports (its features, e.g. KIP-1066 cordon, are tested on a
# cluster of their own), and one older than KIP-827 (what kpo says when brokers report no capacity).
provision_kafkas() {
  provision_kafka "$KAFKA_VERSION"; provision_kafka "$KAFKA_LATEST_VERSION"; provision_kafka "$KAFKA_OLD_VERSION"
}

# ------------------------------------------------------------------------------------------------------ the node
# What a real node needs: containerd and kubelet from the Go module proxy, a pause image and a Debian bookworm base
# image made here (no image can be pulled), the operator and planner images built from the Dockerfile with buildah.
node_dir=$cache/node-$KUBERNETES_VERSION-containerd-$CONTAINERD_VERSION
images_dir=$cache/images
export CONTAINERS_STORAGE_CONF=$cache/containers-storage.conf BUILDAH_ISOLATION=chroot

# Debian packages the node needs: installed here when missing and we may (root with apt-get), named otherwise.
provision_node_packages() {
  local missing=() p
  command -v buildah >/dev/null 2>&1 || missing+=(buildah)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  [ -x /usr/sbin/runc ] || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  command -v iptables >/dev/null 2>&1 || missing+=(iptables)
  [ ${#missing[@]} = 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null       || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
             --no-install-recommends "${missing[@]}" >/dev/null; } \
      || die "apt-get install ${missing[*]} failed: Debian's package mirror must be reachable"
  else
    for p in "${missing[@]}"; do log "missing Debian package: $p"; done
    die "the node needs root and these Debian packages: ${missing[*]}"
  fi
}

provision_node_bins() {
  local b missing=0
  for b in containerd ctr containerd-shim-runc-v2 kubelet kube-scheduler; do [ -x "$node_dir/bin/$b" ] || missing=1; done
  [ $missing = 0 ] && return 0
  need go "install Go >= 1.24 and put it on PATH"
  mkdir -p "$node_dir/bin"
  log "building containerd v$CONTAINERD_VERSION (first time: about 5 minutes on one core)"
  local ld="-s -w -X github.com/containerd/containerd/v2/version.Version=v$CONTAINERD_VERSION"
  for b in containerd ctr containerd-shim-runc-v2; do
    CGO_ENABLED=0 GOBIN="$node_dir/bin" go install -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ld" \
      "github.com/containerd/containerd/v2/cmd/$b@v$CONTAINERD_VERSION" \
      || die "go install containerd/v2/cmd/$b@v$CONTAINERD_VERSION failed: $go_registry_hint"
  done
  log "building kubelet and kube-scheduler v$KUBERNETES_VERSION (first time: about 5 minutes)"
  build_k8s node "$node_dir/bin" kubelet kube-scheduler
}

# CoreDNS, the node's cluster DNS: a wrapper module (testbed/go/coredns) with only the plugins the bed's Corefile
# uses, so the cloud plugins' SDKs are neither downloaded nor compiled.
provision_coredns() {
  [ -x "$coredns_dir/bin/coredns" ] && return 0
  need go "install Go >= 1.26 and put it on PATH"
  local work; work=$(mktemp -d "$cache/coredns-build.XXXX")
  sed -e "s/@COREDNS_VERSION@/v$COREDNS_VERSION/g" "$here/go/coredns/go.mod.in" > "$work/go.mod"
  cp "$here/go/coredns/main.go" "$work/"
  [ -f "$here/go/coredns/go.sum" ] && cp "$here/go/coredns/go.sum" "$work/"
  log "building CoreDNS v$COREDNS_VERSION (first time: about 3.6 CPU-minutes, 2-14 minutes depending on load)"
  (cd "$work" && go mod tidy >/dev/null) || die "could not resolve github.com/coredns/coredns v$COREDNS_VERSION: $go_registry_hint"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o bin/coredns .) \
    || die "go build github.com/coredns/coredns v$COREDNS_VERSION failed (see above)"
  cp "$work/go.sum" "$here/go/coredns/go.sum" 2>/dev/null || true
  mkdir -p "$coredns_dir" && rm -rf "$coredns_dir/bin" && mv "$work/bin" "$coredns_dir/bin" && rm -rf "$work"
}

# prometheus and promtool: a wrapper module (testbed/go/prometheus) whose tool directives pin both main packages.
# Built without the builtinassets tag (no web UI, whose assets are an npm build: the API is all the tests use) and
# with remove_all_sd (static, file and HTTP discovery only: the cloud SDKs are not compiled into prometheus; promtool
# still imports Kubernetes discovery for `check service-discovery`).
provision_prometheus() {
  [ -x "$prometheus_dir/bin/prometheus" ] && [ -x "$prometheus_dir/bin/promtool" ] && return 0
  need go "install Go >= 1.26.7 and put it on PATH"
  local work; work=$(mktemp -d "$cache/prometheus-build.XXXX")
  sed -e "s/@PROMETHEUS_VERSION@/v$PROMETHEUS_VERSION/g" "$here/go/prometheus/go.mod.in" > "$work/go.mod"
  [ -f "$here/go/prometheus/go.sum" ] && cp "$here/go/prometheus/go.sum" "$work/"
  log "building prometheus and promtool v$PROMETHEUS_VERSION (first time: about 9.4 CPU-minutes, 14 minutes on 2 busy cores)"
  (cd "$work" && go mod tidy >/dev/null) \
    || die "could not resolve github.com/prometheus/prometheus v$PROMETHEUS_VERSION: $go_registry_hint"
  # The release number (3.X.Y) the binaries report, from the module's own VERSION file.
  local release pkg=github.com/prometheus/common/version
  release=$(cat "$GOMODCACHE/github.com/prometheus/prometheus@v$PROMETHEUS_VERSION/VERSION")
  (cd "$work" && mkdir bin && go build -trimpath -tags remove_all_sd \
      -ldflags "-s -w -X $pkg.Version=$release -X $pkg.Branch=HEAD -X $pkg.Revision=v$PROMETHEUS_VERSION" -o bin/ \
      github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool) \
    || die "go build github.com/prometheus/prometheus/cmd/{prometheus,promtool} v$PROMETHEUS_VERSION failed (see above)"
  cp "$work/go.sum" "$here/go/prometheus/go.sum" 2>/dev/null || true
  mkdir -p "$prometheus_dir" && rm -rf "$prometheus_dir/bin" && mv "$work/bin" "$prometheus_dir/bin" && rm -rf "$work"
}

# argocd-health: a wrapper module (testbed/go/argocd-health) around argo-cd's util/lua, the VM Argo CD's controller
# runs a resource health customization in. argo-cd's go.mod replaces the k8s.io staging modules (and a few others);
# a consumer's build ignores those, so they are copied from the module's own go.mod into the wrapper's (local-path
# replaces left out: they point into argo-cd's tree, which the module zip does not carry).
provision_argocd() {
  [ -x "$argocd_dir/bin/argocd-health" ] && return 0
  need go "install Go >= 1.26 and put it on PATH"
  local work argocd_mod mod=github.com/argoproj/argo-cd/v3@v$ARGOCD_VERSION
  work=$(mktemp -d "$cache/argocd-build.XXXX")
  sed -e "s/@ARGOCD_VERSION@/v$ARGOCD_VERSION/g" "$here/go/argocd-health/go.mod.in" > "$work/go.mod"
  cp "$here/go/argocd-health/main.go" "$work/"
  [ -f "$here/go/argocd-health/go.sum" ] && cp "$here/go/argocd-health/go.sum" "$work/"
  log "building argocd-health on argo-cd v$ARGOCD_VERSION (first time: about 6.2 CPU-minutes, 4-5 minutes on 2 busy cores)"
  argocd_mod=$(cd "$work" && go mod download -json "$mod" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p') \
    && [ -f "$argocd_mod" ] || die "could not resolve $mod: $go_registry_hint"
  awk '/^replace \(/ { block = 1; print; next }
       block && /^\)/ { block = 0; print; next }
       block { if ($0 !~ /=> *\.\.?\//) print; next }
       /^replace / && $0 !~ /=> *\.\.?\// { print }' "$argocd_mod" >> "$work/go.mod"
  (cd "$work" && go mod tidy >/dev/null) || die "could not resolve $mod's dependencies: $go_registry_hint"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o bin/argocd-health .) \
    || die "go build of argocd-health on $mod failed (see above)"
  cp "$work/go.sum" "$here/go/argocd-health/go.sum" 2>/dev/null || true
  mkdir -p "$argocd_dir" && rm -rf "$argocd_dir/bin" && mv "$work/bin" "$argocd_dir/bin" && rm -rf "$work"
}

# Flux's source-controller and kustomize-controller: one wrapper module (testbed/go/flux) whose tool directives pin both
# main packages. Their go.mod files replace a few modules (go-digest, kustomize's api and kyaml, yaml.v3); a consumer's
# build ignores those, so they are copied from each controller's own go.mod into the wrapper's, once each (their
# `./api` replaces left out: they point into the controller's tree; the served api module is the same code). Each
# controller's CRDs (config/crd/bases in its module zip) go beside the binaries, for e2e/flux_support.py to install.
provision_flux() {
  [ -x "$flux_dir/bin/source-controller" ] && [ -x "$flux_dir/bin/kustomize-controller" ] \
    && [ -d "$flux_dir/crds" ] && return 0
  need go "install Go >= 1.26 and put it on PATH"
  local work m mods=() began=$SECONDS
  work=$(mktemp -d "$cache/flux-build.XXXX")
  sed -e "s/@FLUX_SOURCE_CONTROLLER_VERSION@/v$FLUX_SOURCE_CONTROLLER_VERSION/g" \
      -e "s/@FLUX_KUSTOMIZE_CONTROLLER_VERSION@/v$FLUX_KUSTOMIZE_CONTROLLER_VERSION/g" \
      "$here/go/flux/go.mod.in" > "$work/go.mod"
  [ -f "$here/go/flux/go.sum" ] && cp "$here/go/flux/go.sum" "$work/"
  log "building Flux source-controller v$FLUX_SOURCE_CONTROLLER_VERSION and kustomize-controller v$FLUX_KUSTOMIZE_CONTROLLER_VERSION (first time: about 11 CPU-minutes, 14 minutes on 2 busy cores, 1.9 GB peak)"
  for m in "github.com/fluxcd/source-controller@v$FLUX_SOURCE_CONTROLLER_VERSION" \
           "github.com/fluxcd/kustomize-controller@v$FLUX_KUSTOMIZE_CONTROLLER_VERSION"; do
    mods+=("$(cd "$work" && go mod download -json "$m" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')") \
      && [ -f "${mods[-1]}/go.mod" ] || die "could not resolve $m: $go_registry_hint"
  done
  awk '/^replace \(/ { block = 1; next }
       block && /^\)/ { block = 0; next }
       block { if ($0 !~ /=> *\.\.?\//) print "replace " $0; next }
       /^replace / && $0 !~ /=> *\.\.?\// { print }' "${mods[0]}/go.mod" "${mods[1]}/go.mod" \
    | sed -e 's/^replace[[:space:]]*/replace /' -e 's/[[:space:]]*$//' | awk '!seen[$0]++' >> "$work/go.mod"
  # -e: past source-controller's test-only github.com/fluxcd/pkg/helmtestserver, which the proxy does not serve (its
  # complaint goes to tidy.log, shown only if the build fails).
  (cd "$work" && go mod tidy -e >/dev/null 2>tidy.log) \
    || die "could not resolve the Flux controllers' dependencies: $go_registry_hint"
  (cd "$work" && mkdir bin && go build -trimpath -ldflags "-s -w" -o bin/ \
      github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller) \
    || { cat "$work/tidy.log" >&2; die "go build of the Flux controllers failed (see above)"; }
  cp "$work/go.sum" "$here/go/flux/go.sum" 2>/dev/null || true
  mkdir -p "$work/crds" && cp "${mods[0]}"/config/crd/bases/*.yaml "${mods[1]}"/config/crd/bases/*.yaml "$work/crds/"
  mkdir -p "$flux_dir" && rm -rf "$flux_dir/bin" "$flux_dir/crds" && mv "$work/bin" "$work/crds" "$flux_dir/" \
    && rm -rf "$work"
  log "Flux controllers built in $((SECONDS - began)) s"
}

image_archive() {  # name tag -> the OCI archive containerd imports
  echo "$images_dir/$1-$2.oci.tar"
}

provision_images() {
  need buildah "install buildah, runc and debootstrap (Debian: apt-get install buildah runc debootstrap)"
  need debootstrap "install debootstrap (Debian: apt-get install debootstrap)"
  need gcc "install gcc (the pause image is compiled here)"
  mkdir -p "$images_dir"
  [ -f "$CONTAINERS_STORAGE_CONF" ] || printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' \
    "$cache/containers/storage" "$cache/containers/run" > "$CONTAINERS_STORAGE_CONF"
  # The pause image, from Kubernetes' own pause.c (in the k8s.io/kubernetes module), static, FROM scratch.
  local pause; pause=$(image_archive pause "$PAUSE_VERSION")
  if [ ! -f "$pause" ]; then
    local src="$GOMODCACHE/k8s.io/kubernetes@v$KUBERNETES_VERSION/build/pause/linux/pause.c" work c
    [ -f "$src" ] || (cd "$here/go/node" && go mod download "k8s.io/kubernetes@v$KUBERNETES_VERSION" >/dev/null)
    work=$(mktemp -d "$cache/pause.XXXX")
    gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-kpo" -o "$work/pause" "$src" && strip "$work/pause"
    c=$(buildah from scratch)
    buildah copy "$c" "$work/pause" /pause >/dev/null
    buildah config --entrypoint '["/pause"]' --user 65535:65535 --os linux --arch amd64 "$c"
    buildah commit -q --rm "$c" "localhost/pause:$PAUSE_VERSION" >/dev/null
    buildah push -q "localhost/pause:$PAUSE_VERSION" "oci-archive:$pause:registry.k8s.io/pause:$PAUSE_VERSION"
    rm -rf "$work"
  fi
  # The base image: Debian bookworm with Python 3.11 (what python:3.11-slim-bookworm is for users), debootstrapped.
  if ! buildah inspect --type image localhost/debian-python:bookworm >/dev/null 2>&1; then
    local root="$cache/rootfs-bookworm" c mnt
    if [ ! -x "$root/usr/bin/python3" ]; then
      log "debootstrap bookworm (first time: about 2 minutes)"
      rm -rf "$root"
      debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates bookworm \
        "$root" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null || die "debootstrap failed: Debian's mirror must be reachable"
      chroot "$root" apt-get clean
      rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
    fi
    c=$(buildah from scratch); mnt=$(buildah mount "$c")
    cp -a "$root"/. "$mnt"/ && buildah umount "$c" >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
      --cmd '["python3"]' --os linux --arch amd64 "$c"
    buildah commit -q --rm "$c" localhost/debian-python:bookworm >/dev/null
  fi
  # The operator and planner images, from the committed tree (git archive HEAD: never a half-edited working tree),
  # keyed by the trees of what the images copy. Older archives of kpo's images go: the node imports every archive.
  local repo key target
  repo=$(cd "$here/.." && pwd)
  key=$(cd "$repo" && git rev-parse HEAD:operator HEAD:Dockerfile HEAD:requirements.lock HEAD:pyproject.toml \
          HEAD:docker | sha256sum | cut -c1-12)
  for target in operator planner; do
    [ -f "$(image_archive "$target" "$key")" ] || { build_kpo_images "$repo" "$key"; break; }
  done
  find "$images_dir" -maxdepth 1 \( -name 'operator-*.oci.tar' -o -name 'planner-*.oci.tar' \) \
    ! -name "*-$key.oci.tar" -delete
  echo "$key" > "$images_dir/kpo-image-tag"
}

build_kpo_images() {  # repo key
  local repo=$1 key=$2 src target
  src=$(mktemp -d "$cache/kpo-src.XXXX")
  (cd "$repo" && git archive HEAD) | tar -x -C "$src"
  # The host's pip configuration and CA bundle go in for the build only, for machines that reach PyPI through a
  # proxy (as this one does); the images keep neither.
  local mounts=()
  [ -f /etc/pip.conf ] && mounts+=(-v /etc/pip.conf:/etc/pip.conf:ro)
  [ -f /etc/ssl/certs/ca-certificates.crt ] && mounts+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
  for target in operator planner; do
    log "buildah bud --target $target (first time: about 4 minutes; then the cached layers)"
    buildah bud -q --isolation=chroot --network=host --layers "${mounts[@]}" \
      --build-arg PYTHON_IMAGE=localhost/debian-python:bookworm --target "$target" -t "localhost/kpo/$target:$key" \
      -f "$src/Dockerfile" "$src" >/dev/null || die "buildah bud of the $target image failed (see above)"
    rm -f "$(image_archive "$target" "$key")"
    buildah push -q --disable-compression "localhost/kpo/$target:$key" \
      "oci-archive:$(image_archive "$target" "$key"):localhost/kpo/$target:$key"
  done
  rm -rf "$src"
  # Earlier builds' tags go; the builder's cached layers stay (pruning them would reinstall every dependency).
  buildah images --format '{{.Name}}:{{.Tag}}' | grep -E '^localhost/kpo/(operator|planner):' \
    | grep -v ":$key\$" | xargs -r buildah rmi >/dev/null 2>&1 || true
}

what=${1:-all}
case "$what" in
  kafka) provision_kafkas ;;
  k8s) provision_k8s ;;
  etcd) provision_etcd ;;
  helm) provision_helm ;;
  base) provision_kafkas; provision_etcd; provision_helm; provision_k8s ;;
  coredns) provision_coredns ;;
  prometheus) provision_prometheus ;;
  argocd) provision_argocd ;;
  flux) provision_flux ;;
  all) provision_kafkas; provision_etcd; provision_helm; provision_k8s; provision_prometheus; provision_argocd
       provision_flux; provision_node_packages; provision_node_bins
       provision_coredns; provision_images ;;
  node) provision_node_packages; provision_node_bins; provision_coredns; provision_images ;;
  *) die "unknown component '$what' (all, base, kafka, k8s, etcd, helm, prometheus, argocd, flux, node, coredns)" ;;
esac
echo "$cache"
