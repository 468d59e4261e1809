#!/usr/bin/env bash
# Builds helm v3.22.0 from the Go module proxy into a per-user cache and
# prints the binary's path. Idempotent: a cached binary of the right version
# is reused without touching the network.
#
#   HELM=$(charts/scripts/install-helm.sh)
#
# Environment: HAPTIC_HELM_VERSION (default v3.22.0), HAPTIC_CACHE_DIR
# (default $HOME/.cache/haptic), GO (default: go on PATH, else /usr/local/go/bin/go).
set -euo pipefail

version="${HAPTIC_HELM_VERSION:-v3.22.0}"
cache="${HAPTIC_CACHE_DIR:-$HOME/.cache/haptic}"
dir="$cache/helm-$version"
helm="$dir/helm"

if [[ -x "$helm" ]] && "$helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$version"; then
    echo "$helm"
    exit 0
fi

go="${GO:-}"
if [[ -z "$go" ]]; then
    if command -v go >/dev/null 2>&1; then go=go
    elif [[ -x /usr/local/go/bin/go ]]; then go=/usr/local/go/bin/go
    else echo "install-helm.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1
    fi
fi

mkdir -p "$dir"
echo "install-helm.sh: building helm $version with $("$go" version) (GOPROXY=$("$go" env GOPROXY)); this takes a few minutes" >&2
# helm's version string comes from ldflags in its own Makefile; set it so
# `helm version` reports the release instead of "v3.x+unknown".
ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
GOBIN="$dir" GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" \
    "$go" install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version" >&2

if ! "$helm" version --template '{{.Version}}' | grep -qx "$version"; then
    echo "install-helm.sh: built $helm but it reports $("$helm" version --template '{{.Version}}'), expected $version" >&2
    exit 1
fi
echo "$helm"
