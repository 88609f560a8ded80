#!/usr/bin/env bash
# Boots a two-CPU QEMU guest (TCG; never KVM) whose /init is crates/manager/vm/cgroup2-guest.sh
# and prints its serial console: the cgroup v2 test of the manager's cpuset confinement and
# cleanup (the host may have cpuset bound to cgroup v1, as CI's does). The kernel is the one
# the NUMA VM test fetches (crates/numa/vm/fetch-kernel.sh, cached in target/numa-vm/kernel);
# the guest runs the host's `partita` binary with the shared libraries it links, copied from
# the host, so nothing is rebuilt for the guest.
#
#   crates/manager/vm/cgroup2-run.sh PARTITA_BINARY     env: CG2_VM_TIMEOUT (s, default 240)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ws=$(cd "$here/../../.." && pwd)
bin=${1:?usage: cgroup2-run.sh PARTITA_BINARY}
out=$ws/target/cgroup2-vm
timeout_s=${CG2_VM_TIMEOUT:-240}
mkdir -p "$out"

for tool in qemu-system-x86_64 cpio gzip ldd; do
  command -v "$tool" >/dev/null || { echo "cgroup2-vm: $tool not found (run scripts/install-deps)" >&2; exit 2; }
done
busybox=/bin/busybox
[[ -x $busybox ]] || busybox=$(command -v busybox || true)
if [[ -z $busybox ]] || ldd "$busybox" 2>&1 | grep -q '=>'; then
  echo "cgroup2-vm: a static busybox is needed (Debian package busybox-static)" >&2
  exit 2
fi
kernel=$("$ws/crates/numa/vm/fetch-kernel.sh")/vmlinuz

root=$out/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,run}
cp "$busybox" "$root/bin/busybox"
# Without debug information the initramfs is ~6x smaller (faster to pack and to boot).
strip -o "$root/bin/partita" "$bin" 2>/dev/null || cp "$bin" "$root/bin/partita"
# The loader and every library the binary links, at the same paths.
for lib in $(ldd "$bin" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp "$here/cgroup2-guest.sh" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initramfs.cpio.gz"

echo "cgroup2-vm: booting (TCG, 2 CPUs, 512 MiB, timeout ${timeout_s}s)" >&2
log=$out/serial.log
rm -f "$log"
set +e
nice -n 19 timeout --kill-after=5 "$timeout_s" qemu-system-x86_64 \
  -machine pc,accel=tcg -cpu max -smp 2 -m 512M \
  -kernel "$kernel" -initrd "$out/initramfs.cpio.gz" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3" \
  -display none -monitor none -serial "file:$log" -no-reboot
rc=$?
set -e
cat "$log" 2>/dev/null || true
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "PARTITA-CG2 TIMEOUT after ${timeout_s}s"
  exit 3
fi
exit $rc
