#!/usr/bin/env bash
# The image's HAProxy, runnable on this machine: the same Debian package, the
# same binary, for `haptic render`, `haptic test`, `haptic run`, the tests
# and the benches.
#
#   image/host-haproxy.sh            # prints the binary's path, installing it when missing
#   image/host-haproxy.sh --refresh  # resolves the suite's current version again
#
# Why this way: the image runs Debian trixie's haproxy package (3.0 LTS, with
# QUIC); our development and CI machines are bookworm, whose glibc (2.36) is
# older than what trixie's binary needs (2.38). Rather than compile a second
# build of HAProxy on bookworm's libraries (another binary than the one the
# pods run, and minutes of compiling), this takes trixie's own binary and the
# shared libraries it loads from a trixie userland (mmdebstrap, as the image
# build does) and points the binary at them: its ELF interpreter becomes
# trixie's dynamic loader, its DT_RPATH the copied libraries (DT_RPATH, not
# RUNPATH, so the libraries' own dependencies resolve there too). Nothing runs
# through a wrapper: the master re-executes its own file on `reload`, and that
# file loads the same libraries again.
#
# Cached outside the checkout, keyed by the package version:
#   $HAPTIC_HAPROXY_CACHE/<version>/haproxy, lib/, packages
#   $HAPTIC_HAPROXY_CACHE/current -> <version>
# (default ~/.cache/haptic/haproxy). The Makefile exports
# HAPTIC_HAPROXY=$HAPTIC_HAPROXY_CACHE/current/haproxy; a HAPTIC_HAPROXY set
# by the user wins.
#
# Needs (Debian): mmdebstrap and patchelf (installed when missing and root or
# sudo is at hand); root, or a user mmdebstrap's unshare mode works for.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=image/userland.sh
source "$here/userland.sh"
cache="${HAPTIC_HAPROXY_CACHE:-$HOME/.cache/haptic/haproxy}"
current="$cache/current/haproxy"

step() { printf '==> %s\n' "$*" >&2; }
fail() { echo "$0: $*" >&2; exit 1; }

if [[ "${1:-}" != --refresh ]] && "$current" -v >/dev/null 2>&1; then
    echo "$current"
    exit 0
fi

sudo=""
[[ "$(id -u)" == 0 ]] || sudo=sudo
missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v patchelf >/dev/null || missing+=(patchelf)
if [[ ${#missing[@]} -gt 0 ]]; then
    step "installing ${missing[*]}"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
        fail "could not install ${missing[*]}; install them (Debian: apt-get install ${missing[*]}) or set HAPTIC_HAPROXY to a HAProxy 3.0 or newer"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/haptic-haproxy.XXXXXX")"
trap 'rm -rf "$work"' EXIT
base="$work/base"
step "mmdebstrap $suite (minbase, haproxy) from $mirror: about a minute, once"
debian_userland "$base" "$work/mmdebstrap.log" haproxy ||
    { cat "$work/mmdebstrap.log" >&2; fail "mmdebstrap failed (log above); set HAPTIC_HAPROXY to a HAProxy 3.0 or newer instead"; }

loader="$base/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
libdir="$base/usr/lib/x86_64-linux-gnu"
[[ -e "$loader" ]] || fail "$suite's userland has no x86-64 dynamic loader at ${loader#"$base"}"
version="$(dpkg-query --admindir="$base/var/lib/dpkg" -W -f='${Version}' haproxy)"
[[ -n "$version" ]] || fail "haproxy is not installed in the $suite userland (log: $work/mmdebstrap.log)"

dest="$cache/$version"
staging="$cache/.$version.partial"
rm -rf "$staging"
mkdir -p "$staging/lib"
# The ELF closure as trixie's own loader resolves it (the authority, not a
# list kept here), plus libgcc_s, which glibc dlopens on thread cancellation.
mapfile -t libraries < <(
    "$loader" --library-path "$libdir" --list "$base/usr/sbin/haproxy" |
        awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u
)
for library in "${libraries[@]}" "$libdir/libgcc_s.so.1"; do
    [[ "$library" == "$base"* ]] || library="$base$library"
    cp -L "$library" "$staging/lib/"
done
cp "$base/usr/sbin/haproxy" "$staging/haproxy"
patchelf --set-interpreter "$dest/lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$dest/lib" "$staging/haproxy"
# Which packages the files came from (licences and security updates).
for library in "${libraries[@]}"; do
    dpkg-query --admindir="$base/var/lib/dpkg" -S "${library#"$base"}" 2>/dev/null ||
        dpkg-query --admindir="$base/var/lib/dpkg" -S "/usr${library#"$base"}" 2>/dev/null || true
done | awk -F': ' '!/^diversion/ {gsub(/, /, "\n", $1); print $1}' | sort -u |
    xargs dpkg-query --admindir="$base/var/lib/dpkg" -W -f='${Package}=${Version}\n' >"$staging/packages"
echo "haproxy=$version" >>"$staging/packages"

rm -rf "$dest"
mv "$staging" "$dest"
ln -sfn "$version" "$cache/current"
"$current" -v >/dev/null 2>&1 || fail "$current does not run: $("$current" -v 2>&1 | head -3)"
step "$("$current" -v | head -1) in $dest"
echo "$current"
