# Sourced by image/build.sh and image/host-haproxy.sh: the one Debian
# userland both take HAProxy from, so the image's HAProxy and the host's are
# the same package of the same suite.
#
#   IMAGE_SUITE            the Debian suite (default trixie: HAProxy 3.0 LTS with QUIC)
#   IMAGE_MIRROR           the archive (default deb.debian.org)
#   IMAGE_SECURITY_MIRROR  its security archive

suite="${IMAGE_SUITE:-trixie}"
mirror="${IMAGE_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

# debian_userland <directory> <log file> <packages, comma-separated>:
# minbase with the packages, no recommends, no docs but the copyrights.
# Returns mmdebstrap's status; its output is in the log.
debian_userland() {
    mmdebstrap --variant=minbase --include="$3" \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --aptopt='APT::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        "$suite" "$1" \
        "deb $mirror $suite main" \
        "deb $mirror $suite-updates main" \
        "deb $security_mirror $suite-security main" >"$2" 2>&1
}
