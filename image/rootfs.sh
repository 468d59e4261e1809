#!/usr/bin/env bash
# The image's root filesystem, taken from a Debian userland that has haproxy
# and ca-certificates installed (and haptic at /usr/local/bin/haptic):
#
#   image/rootfs.sh <userland> <rootfs> [<examples/cluster>]
#
# Used by image/build.sh (the userland is an mmdebstrap directory) and by the
# Containerfile (the userland is its own build stage, `/`), so both images
# have one layout. Only what runs is taken: haproxy, haptic, the shared
# libraries the two load (their ELF closure as the userland's dynamic loader
# resolves it: ldd, not a list kept here), the CA bundle, OpenSSL's
# configuration, and each package's copyright and dpkg record (licences,
# vulnerability scanners). No shell, no package manager, no coreutils:
# nothing in the pods needs them. Then the bundled template libraries are
# compiled, by the image's own haptic, into the read-only compile cache
# /usr/lib/haptic/cache, so a cold `haptic render` or controller does no JIT.
#
# Prints the packages taken (name=version), one line, on stdout.
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: $0 <userland> <rootfs> [<examples/cluster>]" >&2; exit 2; }
base="$(realpath "$1")"
root="$(realpath -m "$2")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cluster="${3:-$(dirname "$here")/examples/cluster}"
uid=65532
step() { printf '==> %s\n' "$*" >&2; }
in_base() { if [[ "$base" == / ]]; then "$@"; else chroot "$base" "$@"; fi; }

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

# Which package owns a path: dpkg records /lib/... for some packages and
# /usr/lib/... for others (merged /usr), so both spellings are asked.
owner_of() {
    local path="${1#/usr}" owner
    for candidate in "/usr$path" "$path"; do
        if owner="$(in_base dpkg-query -S "$candidate" 2>/dev/null)"; then
            echo "${owner%%: *}" | tr ', ' '\n\n' | grep -v '^$'
            return 0
        fi
    done
}

step "assembling the root filesystem"
mkdir -p "$root"
for link in bin sbin lib lib64; do cp -a "$base/$link" "$root/$link"; done

programs=(/usr/sbin/haproxy /usr/local/bin/haptic)
# The libraries each program loads, as the image's own dynamic loader
# resolves them (haproxy's ldd output is the authority, not a list kept here).
mapfile -t libraries < <(
    for program in "${programs[@]}"; do in_base ldd "$program"; done |
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
    in_base dpkg-query -s "$package" >"$root/var/lib/dpkg/status.d/$name"
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

# wasmtime's compile cache, filled by the image's own binary in the image's
# own root (the cache key is the engine's configuration, the CPU features
# Cranelift targets and the component's bytes, so the same binary on a
# like CPU hits). `haptic render` loads every bundled library. At run time
# haptic copies it into its writable cache (HAPTIC_PRECOMPILED_DIR, see
# host/src/precompiled.rs).
step "precompiling the bundled template libraries"
cache="/usr/lib/haptic/cache"
export HAPTIC_CACHE_DIR="$cache" HAPTIC_LOG=warn HOME=/tmp HAPTIC_DEFAULT_CERTIFICATE=/tmp/default.pem
mkdir -p "$root$cache"
cp -a "$cluster" "$root/tmp/cluster"
# The render's default certificate goes to /tmp, emptied below: no key ships.
chroot "$root" /usr/local/bin/haptic render --no-validate /tmp/cluster \
    </dev/null >/dev/null 2>"$root/tmp/precompile.log" \
    || { cat "$root/tmp/precompile.log" >&2; exit 1; }
find "$root/tmp" -mindepth 1 -delete
# Usage statistics and clean-up markers are per-machine bookkeeping (and
# written in the background): only the compiled modules ship.
find "$root$cache" -type f \( -name '*.stats' -o -name '.*' -o ! -path '*/modules/*' \) -delete
find "$root$cache" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0444 {} +
compiled="$(find "$root$cache" -type f | wc -l)"
[[ "$compiled" -ge 4 ]] || { echo "$0: expected the 4 bundled libraries in the compile cache, found $compiled" >&2; exit 1; }

mkdir -p "$root/usr/lib/haptic"
for p in "${packages[@]}"; do printf '%s=%s ' "${p%%:*}" "$(in_base dpkg-query -W -f '${Version}' "$p")"; done >"$root/usr/lib/haptic/packages"
cat "$root/usr/lib/haptic/packages"; echo
