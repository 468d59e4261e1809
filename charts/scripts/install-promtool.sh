#!/usr/bin/env bash
# Builds promtool (Prometheus's rule checker and rule unit-test runner) from
# the Go module proxy into a per-user cache and prints the binary's path.
# Idempotent: a cached binary of the right version is reused without touching
# the network. The chart's alert rules are checked with it (make chart-test).
#
#   PROMTOOL=$(charts/scripts/install-promtool.sh)
#
# Environment: HAPTIC_PROMTOOL_VERSION (the Go module version of
# github.com/prometheus/prometheus, default v0.316.0, i.e. Prometheus 3.16.0),
# HAPTIC_CACHE_DIR (default $HOME/.cache/haptic), GO (default: go on PATH,
# else /usr/local/go/bin/go).
set -euo pipefail

version="${HAPTIC_PROMTOOL_VERSION:-v0.316.0}"
cache="${HAPTIC_CACHE_DIR:-$HOME/.cache/haptic}"
dir="$cache/promtool-$version"
promtool="$dir/promtool"

# The binary is installed under its final name only after a build succeeded,
# so its presence is the cache's validity.
if [[ -x "$promtool" ]] && "$promtool" --version >/dev/null 2>&1; then
    echo "$promtool"
    exit 0
fi

go="${GO:-}"
if [[ -z "$go" ]]; then
    if command -v go >/dev/null 2>&1; then go=go
    elif [[ -x /usr/local/go/bin/go ]]; then go=/usr/local/go/bin/go
    else echo "install-promtool.sh: no Go toolchain found (set GO=/path/to/go)" >&2; exit 1
    fi
fi

mkdir -p "$dir"
echo "install-promtool.sh: building promtool $version with $("$go" version) (GOPROXY=$("$go" env GOPROXY)); this takes a few minutes" >&2
# remove_all_sd (Prometheus's own build tag, its README) leaves out the
# optional service discoveries (cloud SDKs, Kubernetes' client): checking and
# unit-testing rules needs none of them, and a cold build compiles a fraction
# of the packages.
GOBIN="$dir/.build" GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" \
    "$go" install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$version" >&2
mv "$dir/.build/promtool" "$promtool"
rmdir "$dir/.build" 2>/dev/null || true

if ! "$promtool" --version >/dev/null 2>&1; then
    echo "install-promtool.sh: built $promtool but it does not run" >&2
    exit 1
fi
echo "$promtool"
