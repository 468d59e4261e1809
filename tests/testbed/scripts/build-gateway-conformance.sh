#!/usr/bin/env bash
# Builds the Gateway API conformance suite from tests/testbed/gateway-conformance through the Go
# module proxy, once per release, into a cache outside the repository:
#
#   conformance.test  `go test -c` of sigs.k8s.io/gateway-api/conformance (the suite, with the
#                     release's CRDs and test manifests embedded)
#   echo-basic        the suite's backend (conformance/echo-basic), built as its Dockerfile does
#                     (CGO off, trimmed, stripped); build-node-images.sh packs it as an image
#   dns-server        cmd/dns-server, the bed's stand-in for the suite's CoreDNS pod (whoami for
#                     foo.bar.com; see its comment), packed as an image the same way
#
# A second run finds both and returns at once. Prints the directory on stdout (the last line);
# progress goes to stderr.
#
# Environment:
#   HAPTIC_TESTBED_CACHE  cache root (default: ~/.cache/haptic-testbed)
#   HAPTIC_TESTBED_FORCE  set to 1 to rebuild even when the binaries exist
set -euo pipefail

GO_DIR="$(cd "$(dirname "$0")/../gateway-conformance" && pwd)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

# The version is whatever go.mod pins, so the cache key can never drift from the build.
VERSION="$(awk '$1 == "sigs.k8s.io/gateway-api/conformance" { print $2; exit }' "$GO_DIR/go.mod")"
if [[ ! "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "build-gateway-conformance.sh: no sigs.k8s.io/gateway-api/conformance release in $GO_DIR/go.mod" >&2
    exit 1
fi
CACHE_ROOT="${HAPTIC_TESTBED_CACHE:-$HOME/.cache/haptic-testbed}"
BIN_DIR="$CACHE_ROOT/gateway-api-$VERSION"

if [[ "${HAPTIC_TESTBED_FORCE:-0}" != 1 && -x "$BIN_DIR/conformance.test" && -x "$BIN_DIR/echo-basic" && -x "$BIN_DIR/dns-server" ]]; then
    echo "build-gateway-conformance.sh: the $VERSION suite is already in $BIN_DIR" >&2
    echo "$BIN_DIR"
    exit 0
fi
if ! command -v go >/dev/null; then
    echo "build-gateway-conformance.sh: 'go' is not on PATH; install Go >= 1.26 to build the suite" >&2
    exit 1
fi

# Build into a staging dir and move at the end: an interrupted build never leaves a
# half-filled cache that a later run would take as complete.
mkdir -p "$CACHE_ROOT"
STAGE="$(mktemp -d "$CACHE_ROOT/.build-gateway-api-$VERSION.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

START=$(date +%s)
echo "build-gateway-conformance.sh: building the Gateway API $VERSION suite into $BIN_DIR (cold: about 3 min on 2 cores)" >&2
cd "$GO_DIR"
go test -c -trimpath -o "$STAGE/conformance.test" sigs.k8s.io/gateway-api/conformance
go build -trimpath -ldflags="-buildid= -s -w" -o "$STAGE/echo-basic" sigs.k8s.io/gateway-api/conformance/echo-basic
go build -trimpath -ldflags="-buildid= -s -w" -o "$STAGE/dns-server" ./cmd/dns-server
mkdir -p "$BIN_DIR"
mv -f "$STAGE/conformance.test" "$STAGE/echo-basic" "$STAGE/dns-server" "$BIN_DIR/"
echo "build-gateway-conformance.sh: built in $(( $(date +%s) - START )) s" >&2
echo "$BIN_DIR"
