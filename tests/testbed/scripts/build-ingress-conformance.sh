#!/usr/bin/env bash
# Builds the upstream Ingress conformance suite (kubernetes-sigs/ingress-controller-conformance,
# the `features/*.feature` scenarios run by godog) at a pinned commit, once, into a cache outside
# the repository:
#
#   ingress-conformance.test  `go test -c` of the suite
#   features/                 its Gherkin features (the suite reads them at run time)
#   echoserver                its backend (images/echoserver), built as its Dockerfile does;
#                             build-node-images.sh packs it under the suite's image name
#
# The suite has never been tagged and no Go module proxy serves it, so its source comes from a
# checkout: HAPTIC_INGRESS_CONFORMANCE_SRC, a clone (or bare git directory) of
#   https://github.com/kubernetes-sigs/ingress-controller-conformance
# that holds the pinned commit. Its dependencies (godog, client-go 0.19, ...) come from the Go
# module proxy as its go.sum pins them.
#
# One change to the source, printed when applied: the echo Deployment's image is pinned by
# digest (k8s.gcr.io/...@sha256:...), which no locally built image can match and this machine
# cannot pull; the digest is dropped so the kubelet finds the local image by name and tag.
#
# Prints the cache directory on stdout (the last line); progress goes to stderr.
#
# Environment:
#   HAPTIC_INGRESS_CONFORMANCE_SRC  the checkout (required for the first build)
#   HAPTIC_TESTBED_CACHE            cache root (default: ~/.cache/haptic-testbed)
#   HAPTIC_TESTBED_FORCE            set to 1 to rebuild even when the binaries exist
set -euo pipefail

# The suite's last commit (2021-04-27, "Generated self signed certs should be TLS secrets").
COMMIT=f91a7996369a1b76e5e058f78da2285026178b59
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

CACHE_ROOT="${HAPTIC_TESTBED_CACHE:-$HOME/.cache/haptic-testbed}"
BIN_DIR="$CACHE_ROOT/ingress-conformance-${COMMIT:0:12}"

if [[ "${HAPTIC_TESTBED_FORCE:-0}" != 1 && -x "$BIN_DIR/ingress-conformance.test" && -x "$BIN_DIR/echoserver" && -d "$BIN_DIR/features" ]]; then
    echo "build-ingress-conformance.sh: the suite at ${COMMIT:0:12} is already in $BIN_DIR" >&2
    echo "$BIN_DIR"
    exit 0
fi
SRC="${HAPTIC_INGRESS_CONFORMANCE_SRC:-}"
if [[ -z "$SRC" ]]; then
    cat >&2 <<EOF
build-ingress-conformance.sh: the Ingress conformance suite is not built yet, and its source is
not served by any module proxy. Clone it and point HAPTIC_INGRESS_CONFORMANCE_SRC at the clone:
  git clone https://github.com/kubernetes-sigs/ingress-controller-conformance
  HAPTIC_INGRESS_CONFORMANCE_SRC=\$PWD/ingress-controller-conformance make ingress-conformance
EOF
    exit 1
fi
command -v go >/dev/null || { echo "build-ingress-conformance.sh: 'go' is not on PATH" >&2; exit 1; }

mkdir -p "$CACHE_ROOT"
STAGE="$(mktemp -d "$CACHE_ROOT/.build-ingress-conformance.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/src"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$SRC" cat-file -e "$COMMIT^{commit}" 2>/dev/null || {
        echo "build-ingress-conformance.sh: $SRC does not hold commit $COMMIT (git fetch it)" >&2
        exit 1
    }
    git -C "$SRC" archive "$COMMIT" | tar -x -C "$STAGE/src"
else
    echo "build-ingress-conformance.sh: $SRC is not a git checkout; it must hold commit $COMMIT" >&2
    exit 1
fi

START=$(date +%s)
cd "$STAGE/src"
deployment=test/kubernetes/deployment.go
grep -q 'echoserver:v0.0.1@sha256:' "$deployment" || {
    echo "build-ingress-conformance.sh: $deployment no longer pins the echoserver by digest; check the change below still applies" >&2
    exit 1
}
sed -i 's|\(echoserver:v0\.0\.1\)@sha256:[0-9a-f]*|\1|' "$deployment"
echo "build-ingress-conformance.sh: changed $deployment: $(grep -o 'EchoContainer = .*' "$deployment")" >&2
echo "build-ingress-conformance.sh: building the suite into $BIN_DIR" >&2
go test -c -trimpath -o "$STAGE/ingress-conformance.test" .
go build -trimpath -ldflags="-buildid= -s -w" -o "$STAGE/echoserver" ./images/echoserver
mkdir -p "$BIN_DIR"
rm -rf "$BIN_DIR/features"
cp -r features "$BIN_DIR/features"
mv -f "$STAGE/ingress-conformance.test" "$STAGE/echoserver" "$BIN_DIR/"
echo "build-ingress-conformance.sh: built in $(( $(date +%s) - START )) s" >&2
echo "$BIN_DIR"
