#!/usr/bin/env bash
# Boots a Debian 12 guest with systemd as PID 1 and the unified cgroup v2 hierarchy (QEMU,
# TCG, never KVM) and runs vm/manager/systemd-guest.sh in it: the Debian package is
# installed and the manager checked as a real systemd service (socket activation, readiness,
# crash recovery after SIGKILL, stop, removal, sandbox exposure); see that script.
#
# - The root file system is built once with mmdebstrap from Debian's packages and cached as
#   an ext4 image in target/systemd-vm/ (a new list of packages or a new guest unit rebuilds
#   it); each boot uses it copy-on-write (snapshot=on), so it stays pristine.
# - The kernel is the NUMA guest's Debian cloud kernel (scripts/vm/fetch-kernel.sh,
#   target/numa-vm/kernel); its virtio modules (from the same kernel package, cached here)
#   are loaded by a busybox initramfs that mounts the image and hands over to systemd.
# - A second, read-only disk carries the .deb and the guest script.
#
#   vm/manager/systemd-run.sh PARTITA_DEB    env: SYSTEMD_VM_TIMEOUT (s, default 600)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ws=$(cd "$here/../.." && pwd)
deb=$(realpath "${1:?usage: systemd-run.sh PARTITA_DEB}")
out=$ws/target/systemd-vm
timeout_s=${SYSTEMD_VM_TIMEOUT:-600}
mkdir -p "$out"

# shellcheck source=../../scripts/vm/boot.sh
source "$ws/scripts/vm/boot.sh"
vm_require systemd-vm mmdebstrap mke2fs strings
kernel=$(vm_kernel)
kdir=$(dirname "$kernel")
kpkg=$(cat "$kdir/package")

# The kernel package's modules (virtio), extracted once.
mods=$out/modules/$kpkg
if [[ ! -d $mods/lib/modules ]]; then
  rm -rf "$mods" && mkdir -p "$mods"
  echo "systemd-vm: downloading $kpkg for its virtio modules" >&2
  (cd "$mods" && apt-get download -q "$kpkg" >&2 2>/dev/null) ||
    { apt-get update -qq >&2 && (cd "$mods" && apt-get download -q "$kpkg" >&2); }
  dpkg-deb -x "$mods"/*.deb "$mods" && rm -f "$mods"/*.deb
fi

# The root file system, keyed by what goes into it.
packages=systemd,systemd-sysv,dbus,passwd,procps
key=$( (echo "$packages"; cat "$here/systemd-rootfs.sh") | sha256sum | cut -c1-16)
image=$out/rootfs-$key.ext4
if [[ ! -s $image ]]; then
  rm -f "$out"/rootfs-*.ext4
  tree=$out/rootfs.tmp
  rm -rf "$tree"
  t0=$(date +%s)
  echo "systemd-vm: building the root file system with mmdebstrap (once; cached as ${image#"$ws"/})" >&2
  mmdebstrap --mode=root --variant=minbase --include="$packages" \
    --customize-hook="sh $here/systemd-rootfs.sh \"\$1\"" \
    bookworm "$tree" http://deb.debian.org/debian >&2
  mke2fs -q -t ext4 -d "$tree" -F "$image.tmp" 1536M
  rm -rf "$tree"
  mv "$image.tmp" "$image"
  echo "systemd-vm: root file system built in $(( $(date +%s) - t0 ))s" >&2
fi

# The initramfs: busybox, the virtio modules, an /init that mounts the image and starts
# systemd.
root=$out/initramfs
vm_root "$root"
mkdir -p "$root/mods" "$root/newroot"
# virtio_pci and virtio_blk with what they depend on (the modules' depends= fields: there is
# no depmod here), dependencies first.
order=()
add_module() {
  local m=$1 f d
  [[ " ${order[*]} " == *" $m "* ]] && return
  f=$(find "$mods/lib/modules" -name "$m.ko" | head -1)
  [[ -n $f ]] || { echo "systemd-vm: module $m not in $kpkg" >&2; exit 2; }
  for d in $(strings "$f" | sed -n 's/^depends=//p' | tr , ' '); do add_module "$d"; done
  cp "$f" "$root/mods/"
  order+=("$m")
}
add_module virtio_pci
add_module virtio_blk
echo "${order[*]}" > "$root/mods/order"
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /mods/order); do
  insmod /mods/$m.ko || echo "initramfs: insmod $m failed"
done
n=0
while [ ! -b /dev/vda ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
mount -t ext4 -o rw /dev/vda /newroot || { echo "initramfs: cannot mount /dev/vda"; poweroff -f; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /lib/systemd/systemd
INIT
chmod +x "$root/init"
vm_pack "$root" "$out/initramfs.cpio.gz"

# The payload: the package and the guest script.
payload=$out/payload
rm -rf "$payload" && mkdir -p "$payload"
cp "$deb" "$payload/partita.deb"
cp "$here/systemd-guest.sh" "$payload/guest.sh"
mke2fs -q -t ext4 -d "$payload" -F "$out/payload.ext4" \
  "$(( $(du -sm "$payload" | cut -f1) + 32 ))M"

echo "systemd-vm: booting (TCG, 2 CPUs, 1 GiB, timeout ${timeout_s}s)" >&2
log=$out/serial.log
rm -f "$log"
set +e
nice -n 19 timeout --kill-after=5 "$timeout_s" qemu-system-x86_64 \
  -machine pc,accel=tcg -cpu max -smp 2 -m 1G \
  -kernel "$kernel" -initrd "$out/initramfs.cpio.gz" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3 systemd.unified_cgroup_hierarchy=1 systemd.show_status=false" \
  -drive "file=$image,if=virtio,format=raw,snapshot=on" \
  -drive "file=$out/payload.ext4,if=virtio,format=raw,readonly=on" \
  -display none -monitor none -serial "file:$log" -no-reboot -nic none
rc=$?
set -e
cat "$log" 2>/dev/null || true
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "PARTITA-SYSTEMD TIMEOUT after ${timeout_s}s"
  exit 3
fi
exit $rc
