#!/usr/bin/env bash
# Builds the real node's small images locally, as OCI archives that
# `ctr -n k8s.io images import` reads (no registry, no container engine):
#
#   build-node-images.sh <echo-server binary> <output dir> [<gateway suite dir>]
#
# - pause.oci.tar: the sandbox image, `pause` compiled from the kubernetes
#   module's build/pause/linux/pause.c with `gcc -static` (the same source and
#   flags as the release image), named localhost/testbed-pause:<its TAG>.
# - echo.oci.tar: the bed's echo server with the shared libraries it links
#   (copied from this machine, as `ldd` lists them), named
#   haptic.test/echo:testbed.
# - tools.oci.tar: a shell and a few tools for scenario pods that run a
#   script (dash as /bin/sh, curl, cat, touch, with their libraries and the
#   CA bundle, from this machine), named haptic.test/tools:testbed.
# - with a gateway suite dir (build-gateway-conformance.sh's output), the
#   Gateway API conformance suite's images: echo-basic.oci.tar (its
#   echo-basic, under every registry.k8s.io/gateway-api/echo-basic tag the
#   suite's manifests name) and dns.oci.tar (cmd/dns-server, a stand-in for
#   the suite's CoreDNS pod, under the coredns image name the suite names).
#   The names are read from the suite's module, so they follow its release.
# - with INGRESS_CONFORMANCE_DIR set (build-ingress-conformance.sh's output),
#   ingress-echoserver.oci.tar: the upstream Ingress conformance suite's
#   echoserver under the image name its Deployments use.
# - with OAUTH2_DIR set (build-oauth2.sh's output), the external-auth pair:
#   oauth2-proxy.oci.tar (the static oauth2-proxy binary as its entrypoint,
#   with the CA bundle, named haptic.test/oauth2-proxy:<its release>, the
#   version read from tests/testbed/oauth2/go.mod) and mock-oidc.oci.tar
#   (the bed's OIDC provider, cmd/mock-oidc, static too, named
#   haptic.test/mock-oidc:testbed).
#
# Each is one layer packed with umoci, the tool image/build.sh uses for the
# haptic image. The names are fixed here and in tests/testbed/src/node/images.rs.
# An archive newer than its inputs is kept, so a second run returns at once.
#
# Needs (Debian): gcc, libc6-dev, umoci, python3, go (to find the module).
set -euo pipefail

[[ $# == 2 || $# == 3 ]] || { echo "usage: $0 <echo-server binary> <output dir> [<gateway suite dir>]" >&2; exit 2; }
echo_bin="$(realpath "$1")"
out="$(realpath -m "$2")"
gateway_dir="${3:+$(realpath "$3")}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go_dir="$here/../go"

for tool in gcc umoci python3 go; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is needed (Debian: apt-get install gcc libc6-dev umoci python3; Go >= 1.25)" >&2
        exit 2
    }
done
[[ -x "$echo_bin" ]] || { echo "$0: $echo_bin is not an executable (make testbed-images builds it)" >&2; exit 2; }

k8s_version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$go_dir/go.mod")"
module_dir="$(cd "$go_dir" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$k8s_version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
pause_src="$module_dir/build/pause/linux/pause.c"
[[ -f "$pause_src" ]] || { echo "$0: no $pause_src in the Go module cache" >&2; exit 1; }
pause_tag="$(sed -n 's/^TAG ?= *//p' "$module_dir/build/pause/Makefile")"
pause_rev="$(sed -n 's/^REV = *//p' "$module_dir/build/pause/Makefile")"
pause_rev="${pause_rev:-0}"

mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/testbed-images.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=0

# pack <rootfs> <name:tag[ name:tag...]> <archive> <uid> <entrypoint...>
pack() {
    local root="$1" names="$2" archive="$3" uid="$4"
    shift 4
    local first="${names%% *}"
    local layout="$work/oci-$(basename "$archive")" tag="${first##*:}"
    local entry=()
    for arg in "$@"; do entry+=("--config.entrypoint=$arg"); done
    umoci init --layout "$layout"
    umoci new --image "$layout:$tag"
    tar --create --file="$work/layer.tar" --directory="$root" --sort=name \
        --numeric-owner --owner=0 --group=0 --mtime=@0 --format=posix \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime .
    umoci raw add-layer --image "$layout:$tag" "$work/layer.tar"
    umoci config --image "$layout:$tag" --os=linux --architecture=amd64 \
        --config.user="$uid:$uid" --config.workingdir=/ "${entry[@]}" \
        --config.env=PATH=/usr/local/bin:/usr/bin:/bin
    umoci gc --layout "$layout"
    # containerd names an imported image after io.containerd.image.name: one
    # index entry per name, all pointing at the same manifest.
    python3 - "$layout/index.json" $names <<'EOF'
import copy, json, sys
path, names = sys.argv[1], sys.argv[2:]
with open(path) as f:
    index = json.load(f)
manifests = []
for manifest in index["manifests"]:
    for name in names:
        named = copy.deepcopy(manifest)
        named.setdefault("annotations", {})["io.containerd.image.name"] = name
        manifests.append(named)
index["manifests"] = manifests
with open(path, "w") as f:
    json.dump(index, f, separators=(",", ":"), sort_keys=True)
EOF
    tar --create --file="$archive.tmp" --directory="$layout" --sort=name --owner=0 --group=0 \
        --numeric-owner --mtime=@0 --format=posix .
    mv -f "$archive.tmp" "$archive"
    echo "$names -> $archive ($(du -h "$archive" | cut -f1))" >&2
}

fresh() { [[ -f "$1" && "$1" -nt "$2" && "$1" -nt "${BASH_SOURCE[0]}" ]]; }

if ! fresh "$out/pause.oci.tar" "$pause_src"; then
    root="$work/pause-root"
    mkdir -p "$root"
    gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-$pause_rev" -o "$root/pause" "$pause_src"
    # 65535, as in the release image.
    pack "$root" "localhost/testbed-pause:$pause_tag" "$out/pause.oci.tar" 65535 /pause
fi

# copy_with_libs <root> <binary> <path in image>: the binary and the shared
# libraries and loader it links, at the paths it was linked against.
copy_with_libs() {
    local root="$1" bin="$2" dest="$3"
    install -D -m 0755 "$bin" "$root$dest"
    ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
        while read -r lib; do install -D -m 0755 "$(realpath "$lib")" "$root$lib"; done
}

if ! fresh "$out/echo.oci.tar" "$echo_bin"; then
    root="$work/echo-root"
    copy_with_libs "$root" "$echo_bin" /usr/local/bin/echo-server
    pack "$root" "haptic.test/echo:testbed" "$out/echo.oci.tar" 65532 /usr/local/bin/echo-server
fi

if ! fresh "$out/tools.oci.tar" "$(command -v curl)"; then
    command -v curl >/dev/null || { echo "$0: curl is needed for the tools image (apt-get install curl)" >&2; exit 2; }
    root="$work/tools-root"
    copy_with_libs "$root" "$(realpath /bin/sh)" /bin/sh
    for tool in curl cat touch; do copy_with_libs "$root" "$(command -v "$tool")" "/usr/bin/$tool"; done
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    mkdir -p "$root/tmp"
    pack "$root" "haptic.test/tools:testbed" "$out/tools.oci.tar" 65532 /bin/sh
fi
if [[ -n "$gateway_dir" ]]; then
    for bin in echo-basic dns-server; do
        [[ -x "$gateway_dir/$bin" ]] || { echo "$0: no $gateway_dir/$bin (bash tests/testbed/scripts/build-gateway-conformance.sh)" >&2; exit 2; }
    done
    gateway_go_dir="$here/../gateway-conformance"
    suite_version="$(awk '$1 == "sigs.k8s.io/gateway-api/conformance" { print $2; exit }' "$gateway_go_dir/go.mod")"
    suite_dir="$(cd "$gateway_go_dir" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/gateway-api/conformance@$suite_version" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "$suite_dir/base" ]] || { echo "$0: no conformance suite $suite_version in the Go module cache" >&2; exit 1; }
    # Every image name the suite's HTTP, gRPC and base manifests use (mesh/ is not run here).
    suite_images() {
        grep -rhoE "image: *$1:[^[:space:]\"]+" "$suite_dir/base" "$suite_dir/tests" |
            sed 's/^image: *//' | sort -u | tr '\n' ' ' | sed 's/ $//'
    }
    echo_names="$(suite_images registry.k8s.io/gateway-api/echo-basic)"
    dns_names="$(suite_images registry.k8s.io/coredns/coredns)"
    [[ -n "$echo_names" && -n "$dns_names" ]] || { echo "$0: the suite's manifests in $suite_dir name no echo-basic or coredns image" >&2; exit 1; }
    if ! fresh "$out/echo-basic.oci.tar" "$gateway_dir/echo-basic"; then
        root="$work/echo-basic-root"
        install -D -m 0755 "$gateway_dir/echo-basic" "$root/echo-basic"
        # 65532: the distroless nonroot user of the suite's own image.
        pack "$root" "$echo_names" "$out/echo-basic.oci.tar" 65532 /echo-basic
    fi
    if ! fresh "$out/dns.oci.tar" "$gateway_dir/dns-server"; then
        root="$work/dns-root"
        install -D -m 0755 "$gateway_dir/dns-server" "$root/dns-server"
        # Root, as CoreDNS's pod asks for NET_BIND_SERVICE only (port 53).
        pack "$root" "$dns_names" "$out/dns.oci.tar" 0 /dns-server
    fi
fi
if [[ -n "${INGRESS_CONFORMANCE_DIR:-}" ]]; then
    ingress_echo="$INGRESS_CONFORMANCE_DIR/echoserver"
    [[ -x "$ingress_echo" ]] || { echo "$0: no $ingress_echo (bash tests/testbed/scripts/build-ingress-conformance.sh)" >&2; exit 2; }
    # The name the suite's Deployments use (test/kubernetes/deployment.go), its digest dropped.
    ingress_echo_name="k8s.gcr.io/ingressconformance/echoserver:v0.0.1"
    if ! fresh "$out/ingress-echoserver.oci.tar" "$ingress_echo"; then
        root="$work/ingress-echo-root"
        install -D -m 0755 "$ingress_echo" "$root/echoserver"
        # 65532: the distroless nonroot user of the suite's own image.
        pack "$root" "$ingress_echo_name" "$out/ingress-echoserver.oci.tar" 65532 /echoserver
    fi
fi
if [[ -n "${OAUTH2_DIR:-}" ]]; then
    for bin in oauth2-proxy mock-oidc; do
        [[ -x "$OAUTH2_DIR/$bin" ]] || { echo "$0: no $OAUTH2_DIR/$bin (bash tests/testbed/scripts/build-oauth2.sh)" >&2; exit 2; }
    done
    # The tag is the release go.mod pins, as build-oauth2.sh builds it (and
    # tests/testbed/src/node/images.rs names it: OAUTH2_PROXY_IMAGE).
    oauth2_version="$(awk '$1 == "github.com/oauth2-proxy/oauth2-proxy/v7" { print $2; exit }' "$here/../oauth2/go.mod")"
    [[ "$oauth2_version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "$0: no oauth2-proxy release in $here/../oauth2/go.mod" >&2; exit 1; }
    if ! fresh "$out/oauth2-proxy.oci.tar" "$OAUTH2_DIR/oauth2-proxy"; then
        root="$work/oauth2-proxy-root"
        # CGO off: no loader, no libraries; the CA bundle for an https provider.
        install -D -m 0755 "$OAUTH2_DIR/oauth2-proxy" "$root/bin/oauth2-proxy"
        install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
        mkdir -p "$root/tmp"
        # 65532: the distroless nonroot user of oauth2-proxy's own image.
        pack "$root" "haptic.test/oauth2-proxy:$oauth2_version" "$out/oauth2-proxy.oci.tar" 65532 /bin/oauth2-proxy
    fi
    if ! fresh "$out/mock-oidc.oci.tar" "$OAUTH2_DIR/mock-oidc"; then
        root="$work/mock-oidc-root"
        install -D -m 0755 "$OAUTH2_DIR/mock-oidc" "$root/bin/mock-oidc"
        pack "$root" "haptic.test/mock-oidc:testbed" "$out/mock-oidc.oci.tar" 65532 /bin/mock-oidc
    fi
fi
echo "$out"
