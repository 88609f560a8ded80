#!/usr/bin/env bash
# Boots the two-NUMA-node QEMU guest (TCG; never KVM; the boot is scripts/vm/boot.sh, shared
# with the cgroup v2 guest) and runs the partita-numa guest program in it. Prints the guest's
# serial console to stdout; the host test (vm/numa/tests/vm.rs) parses the
# "PARTITA-NUMA ..." lines.
#
# Steps: build the static guest binaries (the two of this package and examples/rayon-heap; their
# own target dir, so the shared target/ keeps its flags), fetch the cloud kernel into target/numa-vm/kernel, pack busybox + the binary into an
# initramfs, boot with two nodes of one CPU and 512 MiB each (the follow guest's unmodified
# program fills a 256 MiB heap on one node and the manager moves it to the other), power off
# at the end.
#
#   vm/numa/run.sh                   env: NUMA_VM_TIMEOUT (seconds, default 200),
#                                         NUMA_VM_ONLY_FOLLOW=1 (only the follow guest),
#                                         NUMA_VM_ONLY_PROCESS=1 (only its issue-31 part)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ws=$(cd "$here/../.." && pwd)
out=$ws/target/numa-vm
timeout_s=${NUMA_VM_TIMEOUT:-200}
mkdir -p "$out"

# shellcheck source=../../scripts/vm/boot.sh
source "$ws/scripts/vm/boot.sh"
vm_require numa-vm

echo "numa-vm: building the static guest binaries" >&2
# Both programs are this package's (partita-numa-vm, beside this script): the wrapper checks
# and the manager-and-application scenario (memory follows CPUs, issue 14), which needs
# partita-manager and partita-runtime, which sit above partita-numa.
(cd "$ws" && CARGO_TARGET_DIR=$ws/target/vm RUSTFLAGS='-C target-feature=+crt-static' \
  CARGO_PROFILE_RELEASE_DEBUG=0 \
  cargo build -q --release -p partita-numa-vm --bin numa-vm-guest --bin numa-follow-guest \
    --target x86_64-unknown-linux-gnu >&2)
# The unmodified rayon program whose heap the manager moves (issue 31): the crates.io rayon on
# partita-runtime through the compat/rayon-core patch, a package of its own (its own
# Cargo.lock), built the same way into the same target directory.
(cd "$ws/examples/rayon-heap" && CARGO_TARGET_DIR=$ws/target/vm \
  RUSTFLAGS='-C target-feature=+crt-static' CARGO_PROFILE_RELEASE_DEBUG=0 \
  cargo build -q --release --locked --target x86_64-unknown-linux-gnu >&2)
guest=$ws/target/vm/x86_64-unknown-linux-gnu/release/numa-vm-guest
follow=$ws/target/vm/x86_64-unknown-linux-gnu/release/numa-follow-guest
heap=$ws/target/vm/x86_64-unknown-linux-gnu/release/rayon-heap
for bin in "$guest" "$follow" "$heap"; do
  if vm_is_dynamic "$bin"; then
    echo "numa-vm: $bin is not statically linked" >&2
    exit 2
  fi
done

kernel=$(vm_kernel)

root=$out/initramfs
vm_root "$root"
cp "$guest" "$root/guest"
cp "$follow" "$root/follow-guest"
cp "$heap" "$root/rayon-heap"
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
echo "PARTITA-NUMA-VM BOOTED $(/bin/busybox uname -r)"
/guest
echo "PARTITA-NUMA-VM EXIT $?"
/follow-guest
echo "PARTITA-NUMA-VM FOLLOW-EXIT $?"
/bin/busybox sync
/bin/busybox poweroff -f
INIT
chmod +x "$root/init"
# NUMA_VM_ONLY_FOLLOW=1 skips the wrapper checks (quicker iteration on the follow scenario;
# the host test then reports the missing checks).
# NUMA_VM_ONLY_PROCESS=1 also skips the follow guest's other scenarios: only the unmodified
# rayon program's (issue 31).
if [[ ${NUMA_VM_ONLY_FOLLOW:-0} == 1 || ${NUMA_VM_ONLY_PROCESS:-0} == 1 ]]; then
  sed -i 's|^/guest$|true|' "$root/init"
fi
if [[ ${NUMA_VM_ONLY_PROCESS:-0} == 1 ]]; then
  sed -i 's|^/follow-guest$|PARTITA_VM_ONLY_PROCESS=1 /follow-guest|' "$root/init"
fi
vm_pack "$root" "$out/initramfs.cpio.gz"

echo "numa-vm: booting (TCG, 2 nodes x 1 CPU x 512 MiB, timeout ${timeout_s}s)" >&2
rc=0
vm_mem=1G vm_boot PARTITA-NUMA-VM "$timeout_s" "$kernel" "$out/initramfs.cpio.gz" "$out/serial.log" \
  numa_balancing=disable \
  -object memory-backend-ram,id=m0,size=512M \
  -object memory-backend-ram,id=m1,size=512M \
  -numa node,nodeid=0,cpus=0,memdev=m0 \
  -numa node,nodeid=1,cpus=1,memdev=m1 || rc=$?
exit $rc
