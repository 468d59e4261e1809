#!/usr/bin/env bash
# Builds haptic's OCI image from Debian packages, with no registry and no
# container engine:
#
#   image/build.sh <haptic binary> <output archive> [<version>]
#
# 1. mmdebstrap installs trixie (minbase) with haproxy (3.0 LTS, with QUIC) and ca-certificates
#    into a scratch directory: the Debian userland the packages expect.
# 2. image/rootfs.sh takes from it only what runs (haproxy, haptic, their
#    shared libraries, CA bundle; no shell, no package manager) and fills
#    the read-only compile cache with the bundled libraries, compiled ahead
#    of time by the image's own haptic.
# 3. umoci packs it as an OCI image layout, archived as a tar that
#    `ctr images import`, `kind load image-archive`, `skopeo copy
#    oci-archive:...` and `podman load` read.
#
# Reproducible: every mtime is SOURCE_DATE_EPOCH (default: the last commit's
# time), tar members are sorted, and the config carries no build time, so the
# same binary and the same Debian package versions give the same digest (the
# package list is printed; pin a snapshot with IMAGE_MIRROR to fix it).
#
# Needs (Debian): mmdebstrap, umoci, python3; run as root or where
# mmdebstrap's unshare mode works.
set -euo pipefail

usage() { echo "usage: $0 <haptic binary> <output .oci.tar> [<version>]" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
haptic_bin="$(realpath "$1")"
out="$(realpath -m "$2")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
version="${3:-$("$haptic_bin" --version | awk '{print $2}')}"

image_name="${IMAGE_NAME:-localhost/haptic}"
# shellcheck source=image/userland.sh
source "$here/userland.sh"
uid=65532
cache=/usr/lib/haptic/cache   # image/rootfs.sh fills it
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)}"

for tool in mmdebstrap umoci python3; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is needed (Debian: apt-get install mmdebstrap umoci python3)" >&2
        exit 2
    }
done
[[ -x "$haptic_bin" ]] || { echo "$0: $haptic_bin is not an executable (build haptic first)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/haptic-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
base="$work/base"     # the Debian userland, never shipped
root="$work/rootfs"   # the image's root filesystem

step() { printf '==> %s\n' "$*" >&2; }

step "mmdebstrap $suite (minbase, haproxy, ca-certificates) from $mirror"
debian_userland "$base" "$work/mmdebstrap.log" haproxy,ca-certificates ||
    { cat "$work/mmdebstrap.log" >&2; echo "$0: mmdebstrap failed (log above)" >&2; exit 1; }

install -D -m 0755 "$haptic_bin" "$base/usr/local/bin/haptic"

bash "$here/rootfs.sh" "$base" "$root" "$repo/examples/cluster" >"$work/packages"

# --- Packing ----------------------------------------------------------------

find "$root" -depth -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

step "packing with umoci"
layout="$work/oci"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
# Our own sorted, fixed-time tar of the root filesystem (umoci compresses it).
tar --create --file="$work/layer.tar" --directory="$root" --sort=name \
    --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime --format=posix .
umoci raw add-layer --image "$layout:$version" \
    --history.created="$created" --history.created_by="image/build.sh" "$work/layer.tar"
umoci config --image "$layout:$version" \
    --created="$created" --history.created="$created" --history.created_by="image/build.sh config" \
    --author="haptic" --os=linux --architecture=amd64 \
    --config.user="$uid:$uid" --config.workingdir=/ \
    --config.entrypoint=/usr/local/bin/haptic --config.cmd=--help \
    --config.env=PATH=/usr/local/bin:/usr/sbin:/usr/bin \
    --config.env=HAPTIC_HAPROXY=/usr/sbin/haproxy \
    --config.env=HAPTIC_CACHE_DIR=/tmp/haptic-cache \
    --config.env=HAPTIC_PRECOMPILED_DIR="$cache" \
    --config.env=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --config.label=org.opencontainers.image.title=haptic \
    --config.label=org.opencontainers.image.version="$version" \
    --config.label=org.opencontainers.image.licenses=Apache-2.0 \
    --manifest.annotation=org.opencontainers.image.version="$version"
umoci gc --layout "$layout"

# containerd names the image after io.containerd.image.name; other tools take
# the tag from org.opencontainers.image.ref.name. The index is not part of
# the image's digest.
python3 - "$layout/index.json" "$image_name:$version" <<'EOF'
import json, sys
path, name = sys.argv[1], sys.argv[2]
with open(path) as f:
    index = json.load(f)
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {})["io.containerd.image.name"] = name
with open(path, "w") as f:
    json.dump(index, f, separators=(",", ":"), sort_keys=True)
EOF
find "$layout" -depth -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$(dirname "$out")"
tar --create --file="$out" --directory="$layout" --sort=name --owner=0 --group=0 \
    --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime .

# --- Report -----------------------------------------------------------------

digest="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$layout/index.json")"
sizes="$(python3 "$here/sizes.py" "$root" /usr/local/bin/haptic /usr/sbin/haproxy \
    $(chroot "$base" ldd /usr/sbin/haproxy | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'))"
mib() { awk -v b="$1" 'BEGIN { printf "%6.1f MiB", b / 1048576 }'; }
read -r total haptic_size haproxy_size cache_size <<<"$sizes"
echo "image:      $image_name:$version"
echo "archive:    $out ($(mib "$(stat -c %s "$out")") compressed)"
echo "digest:     $digest"
echo "size:       $(mib "$total") uncompressed"
echo "  haptic binary:              $(mib "$haptic_size")"
echo "  haproxy and its libraries:  $(mib "$haproxy_size") (libc shared with haptic)"
echo "  precompiled libraries:      $(mib "$cache_size")"
echo "  the rest (certs, licences): $(mib $((total - haptic_size - haproxy_size - cache_size)))"
echo "packages:   $(cat "$work/packages")"
echo "$digest" >"$out.digest"
