#!/usr/bin/env python3
"""Bytes of an image root filesystem, in the groups build.sh reports:

    sizes.py <rootfs> <haptic path> <haproxy path> <haproxy's libraries>...

prints: total, haptic binary, haproxy and its libraries, the compile cache.
Paths are resolved inside <rootfs> (symlinks, absolute or not, and merged
/usr directories), never on the build machine.
"""

import os
import sys

CACHE = "/usr/lib/haptic/cache"


def resolve(root, path, depth=0):
    """The regular file `path` names inside `root`."""
    if depth > 40:
        raise SystemExit(f"sizes.py: symlink loop at {path}")
    parts = [p for p in path.split("/") if p]
    done = "/"
    for i, part in enumerate(parts):
        candidate = os.path.normpath(os.path.join(done, part))
        real = root + candidate
        if os.path.islink(real):
            target = os.readlink(real)
            target = target if target.startswith("/") else os.path.join(done, target)
            rest = "/".join(parts[i + 1:])
            return resolve(root, os.path.normpath(os.path.join(target, rest)) if rest else os.path.normpath(target), depth + 1)
        done = candidate
    return done


def size(root, path):
    return os.lstat(root + path).st_size


def main():
    root, haptic, haproxy, *libraries = sys.argv[1:]
    root = os.path.abspath(root)
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            total += os.lstat(os.path.join(directory, name)).st_size
    haproxy_files = {resolve(root, p) for p in [haproxy, *libraries]}
    cache = 0
    for directory, _, files in os.walk(root + CACHE):
        for name in files:
            cache += os.lstat(os.path.join(directory, name)).st_size
    print(total, size(root, resolve(root, haptic)), sum(size(root, f) for f in haproxy_files), cache)


if __name__ == "__main__":
    main()
