#!/bin/sh
# mmdebstrap's customize hook for the systemd guest (vm/manager/systemd-run.sh): $1 is
# the new root. The guest boots to multi-user.target and runs partita-vm-test.service, which
# mounts the payload disk (/dev/vdb) and runs its guest.sh with output on the serial console,
# then powers off. Consoles and timers that would only slow a TCG boot are masked.
set -eu
r=$1
echo partita-vm > "$r/etc/hostname"
: > "$r/etc/fstab"
cat > "$r/etc/systemd/system/partita-vm-test.service" <<'UNIT'
[Unit]
Description=Partita: the systemd guest's checks (payload disk /dev/vdb)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /mnt/payload && mount -o ro /dev/vdb /mnt/payload && exec sh /mnt/payload/guest.sh'
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=infinity
ExecStopPost=/bin/systemctl poweroff --no-block

[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$r/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/partita-vm-test.service \
  "$r/etc/systemd/system/multi-user.target.wants/partita-vm-test.service"
for u in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer \
  apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer \
  systemd-timesyncd.service; do
  ln -sf /dev/null "$r/etc/systemd/system/$u"
done
# Nothing to fetch in the guest (no network): the package's dependencies are all here.
rm -f "$r"/var/lib/apt/lists/*_Packages 2>/dev/null || true
