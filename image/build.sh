#!/usr/bin/env bash
# Builds haptic's OCI image from Debian packages, with no registry and no
# container engine:
#
#   image/build.sh <haptic binary> <output archive> [<version>]
#
# 1. mmdebstrap installs bookworm (minbase) with haproxy and ca-certificates
#    into a scratch directory: the Debian userland the packages expect.
# 2. The image's root filesystem takes from it only what runs: haproxy, the
#    haptic binary, the shared libraries the two load (their ELF closure, as
#    the dynamic loader resolves it), the CA bundle, and each package's
#    copyright and dpkg record (for licences and vulnerability scanners). No
#    shell, no package manager, no coreutils: nothing in the pods needs them.
# 3. The bundled template libraries are compiled once, by the image's own
#    haptic, into the read-only compile cache /usr/lib/haptic/cache, so a
#    cold `haptic render` or controller in the image does no JIT compilation.
# 4. umoci packs it as an OCI image layout, archived as a tar that
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
suite="${IMAGE_SUITE:-bookworm}"
mirror="${IMAGE_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
uid=65532
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
mmdebstrap --quiet --variant=minbase --include=haproxy,ca-certificates \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$base" \
    "deb $mirror $suite main" \
    "deb $mirror $suite-updates main" \
    "deb $security_mirror $suite-security main"

install -D -m 0755 "$haptic_bin" "$base/usr/local/bin/haptic"

# --- The root filesystem -------------------------------------------------

# Copies one path of the userland into the image, following symlinks (each
# link and its target). Merged /usr: /lib, /bin, /sbin, /lib64 are links to
# their /usr twins, so paths are canonicalised to /usr first.
copy_path() {
    local path="$1"
    case "$path" in
        /lib/* | /lib64/* | /bin/* | /sbin/*) path="/usr$path" ;;
    esac
    [[ -e "$root$path" || -L "$root$path" ]] && return 0
    mkdir -p "$root$(dirname "$path")"
    cp -a "$base$path" "$root$path"
    if [[ -L "$base$path" ]]; then
        local target
        target="$(readlink "$base$path")"
        [[ "$target" == /* ]] || target="$(dirname "$path")/$target"
        copy_path "$(realpath -m -s "$target")"
    fi
}

# Which package owns a path (dpkg records the unmerged /lib paths).
owner_of() {
    local path="$1" alt="${1#/usr}"
    chroot "$base" dpkg-query -S "$path" 2>/dev/null | cut -d: -f1 ||
        chroot "$base" dpkg-query -S "$alt" 2>/dev/null | cut -d: -f1 || true
}

step "assembling the root filesystem"
mkdir -p "$root"
for link in bin sbin lib lib64; do cp -a "$base/$link" "$root/$link"; done

programs=(/usr/sbin/haproxy /usr/local/bin/haptic)
# The libraries each program loads, as the image's own dynamic loader
# resolves them (haproxy's ldd output is the authority, not a list kept here).
mapfile -t libraries < <(
    for program in "${programs[@]}"; do chroot "$base" ldd "$program"; done |
        awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u
)
files=("${programs[@]}" "${libraries[@]}"
    /etc/ssl/certs/ca-certificates.crt /etc/ssl/openssl.cnf /usr/lib/ssl/openssl.cnf
    /usr/lib/os-release /etc/os-release /etc/debian_version)
for file in "${files[@]}"; do copy_path "$file"; done

# Packages the image carries files of: their copyright and dpkg record.
mapfile -t packages < <(
    { for file in "${files[@]}"; do owner_of "$file"; done
      printf '%s\n' haproxy ca-certificates base-files; } | grep -v '^$' | sort -u
)
mkdir -p "$root/var/lib/dpkg/status.d"
for package in "${packages[@]}"; do
    name="${package%%:*}"
    copy_path "/usr/share/doc/$name/copyright" 2>/dev/null || true
    chroot "$base" dpkg-query -s "$package" >"$root/var/lib/dpkg/status.d/$name"
done

# uid/gid 65532 ("nonroot", as distroless images name it) and root; no
# login shell exists.
cat >"$root/etc/passwd" <<EOF
root:x:0:0:root:/root:/usr/sbin/nologin
nonroot:x:$uid:$uid:nonroot:/home/nonroot:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<EOF
root:x:0:
nonroot:x:$uid:
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
install -d -m 0700 "$root/root"
install -d -m 0755 -o "$uid" -g "$uid" "$root/home/nonroot" \
    "$root/var/lib/haptic" "$root/var/lib/haptic/haproxy" "$root/var/cache/haptic"
install -d -m 1777 "$root/tmp"
install -d -m 0755 "$root/run" "$root/proc" "$root/sys" "$root/dev"

# --- Components compiled ahead of time -------------------------------------

# wasmtime's compile cache, filled by the image's own binary (the cache key
# is the engine's configuration and the component's bytes, so a lookup by
# the same binary hits). `haptic render` loads every bundled library.
step "precompiling the bundled template libraries"
cache="/usr/lib/haptic/cache"
mkdir -p "$root$cache"
cp -a "$repo/examples/cluster" "$root/tmp/cluster"
chroot --userspec=0:0 "$root" env HAPTIC_CACHE_DIR="$cache" HAPTIC_LOG=warn HOME=/root \
    /usr/local/bin/haptic render --no-validate /tmp/cluster >/dev/null
rm -rf "$root/tmp/cluster"
# Usage statistics are per-machine bookkeeping (and written in the
# background): only the compiled modules ship.
find "$root$cache" -name '*.stats' -delete
find "$root$cache" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0444 {} +
compiled="$(find "$root$cache" -type f | wc -l)"
[[ "$compiled" -ge 4 ]] || { echo "$0: expected the 4 bundled libraries in the compile cache, found $compiled" >&2; exit 1; }

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
    --config.env=HAPTIC_CACHE_DIR="$cache" \
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
bytes() { du -cb --apparent-size "$@" 2>/dev/null | tail -1 | cut -f1; }
mib() { awk -v b="$1" 'BEGIN { printf "%6.1f MiB", b / 1048576 }'; }
total="$(bytes "$root")"
haptic_size="$(bytes "$root/usr/local/bin/haptic")"
haproxy_libs=()
mapfile -t haproxy_libs < <(chroot "$base" ldd /usr/sbin/haproxy |
    awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    while read -r lib; do realpath -m "$root/usr${lib#/usr}"; done | sort -u)
haproxy_size="$(bytes "$root/usr/sbin/haproxy" "${haproxy_libs[@]}")"
cache_size="$(bytes "$root$cache")"
echo "image:      $image_name:$version"
echo "archive:    $out ($(mib "$(stat -c %s "$out")") compressed)"
echo "digest:     $digest"
echo "size:       $(mib "$total") uncompressed"
echo "  haptic binary:              $(mib "$haptic_size")"
echo "  haproxy and its libraries:  $(mib "$haproxy_size") (libc shared with haptic)"
echo "  precompiled libraries:      $(mib "$cache_size")"
echo "  the rest (certs, licences): $(mib $((total - haptic_size - haproxy_size - cache_size)))"
echo "packages:   $(for p in "${packages[@]}"; do printf '%s=%s ' "${p%%:*}" "$(chroot "$base" dpkg-query -W -f '${Version}' "$p")"; done)"
echo "$digest" >"$out.digest"
