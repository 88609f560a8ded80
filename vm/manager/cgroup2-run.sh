#!/usr/bin/env bash
# Boots a two-CPU QEMU guest (TCG; never KVM; the boot is scripts/vm/boot.sh, shared with the
# NUMA guest) whose /init is vm/manager/cgroup2-guest.sh and prints its serial
# console: the cgroup v2 test of the manager's cpuset confinement and cleanup (the host may
# have cpuset bound to cgroup v1, as CI's does). The kernel is the one
# the NUMA VM test uses (scripts/vm/fetch-kernel.sh, cached in target/numa-vm/kernel);
# the guest runs the host's `partita` binary with the shared libraries it links, copied from
# the host, so nothing is rebuilt for the guest.
#
#   vm/manager/cgroup2-run.sh PARTITA_BINARY     env: CG2_VM_TIMEOUT (s, default 240)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ws=$(cd "$here/../.." && pwd)
bin=${1:?usage: cgroup2-run.sh PARTITA_BINARY}
out=$ws/target/cgroup2-vm
timeout_s=${CG2_VM_TIMEOUT:-240}
mkdir -p "$out"

# shellcheck source=../../scripts/vm/boot.sh
source "$ws/scripts/vm/boot.sh"
vm_require cgroup2-vm
kernel=$(vm_kernel)

root=$out/initramfs
vm_root "$root"
# Without debug information the initramfs is ~6x smaller (faster to pack and to boot).
strip -o "$root/bin/partita" "$bin" 2>/dev/null || cp "$bin" "$root/bin/partita"
# The loader and every library the binary links, at the same paths.
for lib in $(ldd "$bin" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp "$here/cgroup2-guest.sh" "$root/init"
chmod +x "$root/init"
vm_pack "$root" "$out/initramfs.cpio.gz"

echo "cgroup2-vm: booting (TCG, 2 CPUs, 512 MiB, timeout ${timeout_s}s)" >&2
vm_prefix=(nice -n 19)
rc=0
vm_boot PARTITA-CG2 "$timeout_s" "$kernel" "$out/initramfs.cpio.gz" "$out/serial.log" "" || rc=$?
exit $rc
