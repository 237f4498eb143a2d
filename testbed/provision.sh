#!/usr/bin/env bash
# Provision the kpo test bed from the package registries: Kafka jars (Maven Central), etcd, kube-apiserver,
# kube-controller-manager, kubectl and helm (Go module proxy). Everything lands in a cache outside the repository,
# keyed by version, so a second run only checks that the binaries are there.
#
#   testbed/provision.sh [all|kafka|k8s|etcd|helm]
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
kafka_dir=$cache/kafka-$KAFKA_VERSION

go_registry_hint="the Go module proxy must be reachable (GOPROXY=$(go env GOPROXY 2>/dev/null || echo unset)); check the network or set GOPROXY"

provision_k8s() {
  local bins=(kube-apiserver kube-controller-manager kubectl)
  local b missing=0
  for b in "${bins[@]}"; do [ -x "$k8s_dir/bin/$b" ] || missing=1; done
  [ $missing = 0 ] && return 0
  need go "install Go >= 1.24 (https://go.dev/dl or Debian's golang package) and put it on PATH"
  local minor=${KUBERNETES_VERSION#*.}; minor=${minor%%.*}
  local staging="0.$minor.${KUBERNETES_VERSION##*.}"
  local work; work=$(mktemp -d "$cache/k8s-build.XXXX")
  # k8s.io/kubernetes replaces its staging modules with local paths, so `go install ...@v1.X` refuses it. A wrapper
  # module that pins each staging module to the matching v0.X.Y release builds the real main packages unchanged.
  sed -e "s/@KUBERNETES_VERSION@/v$KUBERNETES_VERSION/g" -e "s/@STAGING_VERSION@/v$staging/g" \
    "$here/go/k8s/go.mod.in" > "$work/go.mod"
  cp "$here/go/k8s/main.go" "$work/"
  [ -f "$here/go/k8s/go.sum" ] && cp "$here/go/k8s/go.sum" "$work/"
  log "building kube-apiserver, kube-controller-manager, kubectl v$KUBERNETES_VERSION (first time: about 6 minutes on 2 cores)"
  (cd "$work" && go mod download k8s.io/kubernetes >/dev/null && go mod tidy >/dev/null) \
    || die "could not resolve k8s.io/kubernetes v$KUBERNETES_VERSION: $go_registry_hint"
  local ldflags="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$work/bin"
  for b in "${bins[@]}"; do
    log "go build $b"
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "bin/$b" "k8s.io/kubernetes/cmd/$b") \
      || die "go build k8s.io/kubernetes/cmd/$b v$KUBERNETES_VERSION failed (see above)"
  done
  cp "$work/go.sum" "$here/go/k8s/go.sum" 2>/dev/null || true
  mkdir -p "$k8s_dir" && rm -rf "$k8s_dir/bin" && mv "$work/bin" "$k8s_dir/bin" && rm -rf "$work"
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

provision_kafka() {
  [ -f "$kafka_dir/.complete" ] && return 0
  need java "install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)"
  need mvn "install Maven (Debian: apt-get install maven)"
  log "fetching Kafka $KAFKA_VERSION jars from Maven Central"
  rm -rf "$kafka_dir" && mkdir -p "$kafka_dir/libs"
  mvn -B -q -f "$here/kafka/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$kafka_dir/libs" \
    || die "mvn could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION: Maven Central must be reachable (check ~/.m2/settings.xml mirrors and proxies)"
  touch "$kafka_dir/.complete"
}

what=${1:-all}
case "$what" in
  kafka) provision_kafka ;;
  k8s) provision_k8s ;;
  etcd) provision_etcd ;;
  helm) provision_helm ;;
  all) provision_kafka; provision_etcd; provision_helm; provision_k8s ;;
  *) die "unknown component '$what' (all, kafka, k8s, etcd, helm)" ;;
esac
echo "$cache"
