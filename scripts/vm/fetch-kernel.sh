#!/usr/bin/env bash
# Fetches Debian's cloud kernel for the QEMU guests (vm/numa, the cgroup v2 and systemd VMs)
# into a cache under target/, without installing it on this host: `apt-get download` +
# `dpkg-deb -x`. Idempotent: does nothing when the kernel is already cached. Prints the cache
# directory.
#
#   scripts/vm/fetch-kernel.sh [CACHE_DIR]   (default: <workspace>/target/numa-vm/kernel)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ws=$(cd "$here/../.." && pwd)
cache=${1:-$ws/target/numa-vm/kernel}
if [[ -s $cache/vmlinuz && -s $cache/config ]]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache"
find_pkg() {
  apt-cache depends linux-image-cloud-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9].*-cloud-amd64/ {print $2; exit}'
}
pkg=$(find_pkg || true)
if [[ -z $pkg ]]; then
  echo "fetch-kernel: refreshing apt lists to find linux-image-cloud-amd64" >&2
  apt-get update -qq >&2
  pkg=$(find_pkg || true)
fi
if [[ -z $pkg ]]; then
  echo "fetch-kernel: cannot resolve linux-image-cloud-amd64 to a versioned package" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-kernel: downloading $pkg" >&2
# apt-get download writes into the current directory; the _apt sandbox user may not be able
# to write to a root-owned temp dir, which only costs a warning.
(cd "$work" && apt-get download -q "$pkg" >&2)
deb=$(ls "$work"/*.deb)
dpkg-deb -x "$deb" "$work/x"
cp "$work"/x/boot/vmlinuz-* "$cache/vmlinuz.tmp"
cp "$work"/x/boot/config-* "$cache/config"
echo "$pkg" > "$cache/package"
mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
echo "$cache"
