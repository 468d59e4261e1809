#!/usr/bin/env bash
# Builds the test bed's Kubernetes binaries from tests/testbed/go through the Go module proxy,
# once per Kubernetes version, into a cache outside the repository: the control plane (etcd,
# kube-apiserver, kube-controller-manager, kubectl) and the real node (kubelet, kube-proxy, and kube-scheduler to bind its pods).
# Only the missing binaries are built, so a cache made before the node existed is completed,
# not rebuilt. A second run finds the binaries and returns at once.
#
# Prints the binary directory on stdout (the last line); progress goes to stderr.
#
# Environment:
#   HAPTIC_TESTBED_CACHE  cache root (default: ~/.cache/haptic-testbed)
#   HAPTIC_TESTBED_FORCE  set to 1 to rebuild even when the binaries exist
set -euo pipefail

GO_DIR="$(cd "$(dirname "$0")/../go" && pwd)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

# The version is whatever go.mod pins, so the cache key can never drift from the build.
K8S_VERSION="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$GO_DIR/go.mod")"
if [[ ! "$K8S_VERSION" =~ ^v1\.([0-9]+)\.[0-9]+$ ]]; then
    echo "build-binaries.sh: no k8s.io/kubernetes release in $GO_DIR/go.mod; run scripts/gen-go-mod.sh" >&2
    exit 1
fi
K8S_MINOR="${BASH_REMATCH[1]}"
CACHE_ROOT="${HAPTIC_TESTBED_CACHE:-$HOME/.cache/haptic-testbed}"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION"
# Binary name -> Go package (inside tests/testbed/go or the kubernetes module).
declare -A PACKAGES=(
    [etcd]=./cmd/etcd
    [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
    [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
    [kubectl]=k8s.io/kubernetes/cmd/kubectl
    [kubelet]=k8s.io/kubernetes/cmd/kubelet
    [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
    [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
)
BINARIES=(etcd kube-apiserver kube-controller-manager kubectl kubelet kube-proxy kube-scheduler)

MISSING=()
for b in "${BINARIES[@]}"; do
    if [[ "${HAPTIC_TESTBED_FORCE:-0}" == 1 || ! -x "$BIN_DIR/$b" ]]; then MISSING+=("$b"); fi
done

if [[ ${#MISSING[@]} == 0 ]]; then
    echo "build-binaries.sh: binaries for $K8S_VERSION already in $BIN_DIR" >&2
    echo "$BIN_DIR"
    exit 0
fi

if ! command -v go >/dev/null; then
    echo "build-binaries.sh: 'go' is not on PATH; install Go >= 1.25 to build the test bed" >&2
    exit 1
fi

# Same version stamps as hack/lib/version.sh, so /version and `kubectl version` tell the truth.
# A module-proxy build has no git checkout: the commit is unknown, the tree is the release's.
BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION"
    LDFLAGS+=" -X $pkg.gitMajor=1"
    LDFLAGS+=" -X $pkg.gitMinor=$K8S_MINOR"
    LDFLAGS+=" -X $pkg.gitCommit=unknown-go-module-proxy-build"
    LDFLAGS+=" -X $pkg.gitTreeState=clean"
    LDFLAGS+=" -X $pkg.buildDate=$BUILD_DATE"
done

# Build into a staging dir and move at the end: an interrupted build never leaves a
# half-filled cache that a later run would take as complete.
mkdir -p "$CACHE_ROOT"
STAGE="$(mktemp -d "$CACHE_ROOT/.build-$K8S_VERSION.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

START=$(date +%s)
echo "build-binaries.sh: building Kubernetes $K8S_VERSION ${MISSING[*]} into $BIN_DIR (cold, all seven: 20-35 min on 2 cores)" >&2
cd "$GO_DIR"
TARGETS=()
for b in "${MISSING[@]}"; do TARGETS+=("${PACKAGES[$b]}"); done
go build -trimpath -ldflags "$LDFLAGS" -o "$STAGE/" "${TARGETS[@]}"
mkdir -p "$BIN_DIR"
for b in "${MISSING[@]}"; do mv -f "$STAGE/$b" "$BIN_DIR/$b"; done
echo "build-binaries.sh: built in $(( $(date +%s) - START )) s" >&2
echo "$BIN_DIR"
