#!/usr/bin/env bash
# Builds the external-authentication pair from tests/testbed/oauth2 through the Go module proxy,
# once per release, into a cache outside the repository:
#
#   oauth2-proxy  github.com/oauth2-proxy/oauth2-proxy/v7 (its main package is the module root),
#                 built as its release does (CGO off, trimmed, stripped)
#   mock-oidc     cmd/mock-oidc, an OIDC provider on github.com/oauth2-proxy/mockoidc that logs
#                 every authorize request in as one user, at once (see its comment)
#
# tests/testbed/oauth2/smoke.sh runs the two against each other without Kubernetes.
#
# A second run finds both and returns at once. Prints the directory on stdout (the last line);
# progress goes to stderr.
#
# Environment:
#   HAPTIC_TESTBED_CACHE  cache root (default: ~/.cache/haptic-testbed)
#   HAPTIC_TESTBED_FORCE  set to 1 to rebuild even when the binaries exist
set -euo pipefail

GO_DIR="$(cd "$(dirname "$0")/../oauth2" && pwd)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

# The version is whatever go.mod pins, so the cache key can never drift from the build.
VERSION="$(awk '$1 == "github.com/oauth2-proxy/oauth2-proxy/v7" { print $2; exit }' "$GO_DIR/go.mod")"
if [[ ! "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "build-oauth2.sh: no github.com/oauth2-proxy/oauth2-proxy/v7 release in $GO_DIR/go.mod" >&2
    exit 1
fi
CACHE_ROOT="${HAPTIC_TESTBED_CACHE:-$HOME/.cache/haptic-testbed}"
BIN_DIR="$CACHE_ROOT/oauth2-proxy-$VERSION"

if [[ "${HAPTIC_TESTBED_FORCE:-0}" != 1 && -x "$BIN_DIR/oauth2-proxy" && -x "$BIN_DIR/mock-oidc" ]]; then
    echo "build-oauth2.sh: oauth2-proxy $VERSION and mock-oidc are already in $BIN_DIR" >&2
    echo "$BIN_DIR"
    exit 0
fi
if ! command -v go >/dev/null; then
    echo "build-oauth2.sh: 'go' is not on PATH; install Go >= 1.26 to build oauth2-proxy" >&2
    exit 1
fi

# Build into a staging dir and move at the end: an interrupted build never leaves a
# half-filled cache that a later run would take as complete.
mkdir -p "$CACHE_ROOT"
STAGE="$(mktemp -d "$CACHE_ROOT/.build-oauth2-proxy-$VERSION.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

START=$(date +%s)
echo "build-oauth2.sh: building oauth2-proxy $VERSION and mock-oidc into $BIN_DIR (cold: about 2 min on 2 cores)" >&2
cd "$GO_DIR"
# -X main.VERSION: what `oauth2-proxy --version` and its User-Agent report (its Makefile sets
# it; without it the binary says "undefined").
go build -trimpath -ldflags="-buildid= -s -w -X github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION=$VERSION" \
    -o "$STAGE/oauth2-proxy" github.com/oauth2-proxy/oauth2-proxy/v7
# -buildvcs=false: the same binary whatever state the work tree is in.
go build -trimpath -buildvcs=false -ldflags="-buildid= -s -w" -o "$STAGE/mock-oidc" ./cmd/mock-oidc
mkdir -p "$BIN_DIR"
mv -f "$STAGE/oauth2-proxy" "$STAGE/mock-oidc" "$BIN_DIR/"
echo "build-oauth2.sh: built in $(( $(date +%s) - START )) s" >&2
echo "$BIN_DIR"
