# shellcheck shell=bash
# What the QEMU guest tests share, sourced (never run) by vm/numa/run.sh (two NUMA nodes),
# vm/manager/cgroup2-run.sh (cgroup v2) and vm/manager/systemd-run.sh: tool checks, the kernel
# (Debian's cloud kernel, fetched once into target/numa-vm/kernel by scripts/vm/fetch-kernel.sh),
# a busybox initramfs, and the boot itself: TCG, never KVM (nested KVM hangs on CI hosts),
# 2 CPUs, 512 MiB (the variable vm_mem overrides it, e.g. 1G), the serial console to a log
# file that is printed afterwards.
#
# vm_require takes the caller's tag (`numa-vm`, `cgroup2-vm`) for its messages; vm_boot the
# marker its host-side parser looks for (`PARTITA-NUMA-VM`, `PARTITA-CG2`).

vm_ws=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# vm_require TAG TOOL...: every tool on PATH and a static busybox (a dynamically linked
# program cannot run in the initramfs); sets vm_busybox. Exits 2 otherwise.
vm_require() {
  local tag=$1 tool
  shift
  for tool in qemu-system-x86_64 cpio gzip ldd "$@"; do
    command -v "$tool" >/dev/null || { echo "$tag: $tool not found (run scripts/install-deps)" >&2; exit 2; }
  done
  vm_busybox=/bin/busybox
  [[ -x $vm_busybox ]] || vm_busybox=$(command -v busybox || true)
  if [[ -z $vm_busybox ]] || vm_is_dynamic "$vm_busybox"; then
    echo "$tag: a static busybox is needed (Debian package busybox-static)" >&2
    exit 2
  fi
}

# vm_is_dynamic FILE: whether FILE links shared libraries (ldd lists them with "=>").
vm_is_dynamic() { ldd "$1" 2>&1 | grep -q '=>'; }

# vm_kernel: the guest kernel's path (fetched on first use).
vm_kernel() { echo "$("$vm_ws/scripts/vm/fetch-kernel.sh")/vmlinuz"; }

# vm_root DIR: a fresh initramfs tree in DIR with busybox (vm_require first).
vm_root() {
  rm -rf "$1"
  mkdir -p "$1"/{bin,proc,sys,dev,tmp,run}
  cp "$vm_busybox" "$1/bin/busybox"
}

# vm_pack DIR CPIO_GZ: pack the tree (its /init must be executable).
vm_pack() { (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) > "$2"; }

# vm_boot MARKER TIMEOUT_S KERNEL INITRD LOG APPEND [QEMU ARG...]: boot the guest under
# `timeout` (prefixed by the array vm_prefix, e.g. (nice -n 19), when set), print its serial
# log, and return QEMU's status; after a timeout print "MARKER TIMEOUT after Ns" and return 3.
vm_boot() {
  local marker=$1 timeout_s=$2 kernel=$3 initrd=$4 log=$5 append=$6 rc
  shift 6
  rm -f "$log"
  set +e
  ${vm_prefix[@]+"${vm_prefix[@]}"} timeout --kill-after=5 "$timeout_s" qemu-system-x86_64 \
    -machine pc,accel=tcg -cpu max -smp 2 -m "${vm_mem:-512M}" "$@" \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3${append:+ $append}" \
    -display none -monitor none -serial "file:$log" -no-reboot
  rc=$?
  set -e
  cat "$log" 2>/dev/null || true
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "$marker TIMEOUT after ${timeout_s}s"
    return 3
  fi
  return $rc
}
