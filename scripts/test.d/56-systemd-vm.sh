#!/usr/bin/env bash
# The manager as a real systemd service: builds the Debian package (cargo deb, from the debug
# binary the other suites built), boots a Debian 12 QEMU guest (TCG) with systemd as PID 1
# and cgroup v2 only, installs the package and checks it there (socket activation,
# readiness, SIGKILL → restart → undo, 10 times, stop, apt-get remove, a configuration error,
# sandbox exposure); see vm/manager/systemd-guest.sh. The root file system is built
# once with mmdebstrap and cached under target/systemd-vm/. Needs scripts/install-deps
# (qemu-system-x86, busybox-static, mmdebstrap, cargo-deb) and Debian's mirror for the first
# build of the root file system.
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- partita-manager: systemd VM test"
start=$(date +%s)
if ! command -v cargo-deb >/dev/null; then
  echo "systemd-vm: cargo-deb not found (run scripts/install-deps)" >&2
  exit 2
fi
mkdir -p target/systemd-vm
# SYSTEMD_VM_PROFILE=dev (default): the debug binary the test suite already built (no extra
# build in CI); =release: what `cargo deb -p partita` (README.md) ships, faster in the guest.
profile=${SYSTEMD_VM_PROFILE:-dev}
if [[ $profile == release ]]; then
  cargo build -q --release --bin partita
else
  cargo build -q --bin partita
fi
cargo deb -q -p partita --profile "$profile" --no-build -o target/systemd-vm/partita.deb 2>&1 |
  grep -v -e 'dev profile is not supported' -e 'To enable debug symbols' || true
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
vm/manager/systemd-run.sh target/systemd-vm/partita.deb | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "-- partita-manager: systemd VM test took $(( $(date +%s) - start ))s"
if [[ $rc -ne 0 ]]; then
  echo "systemd-vm: the VM failed (exit $rc)" >&2
  exit 1
fi
done_line=$(grep -a '^PARTITA-SYSTEMD DONE' "$log" | tr -d '\r' || true)
if [[ -z $done_line ]]; then
  echo "systemd-vm: the guest did not finish" >&2
  exit 1
fi
if [[ $done_line != *" failed=0" ]] || grep -aq '^PARTITA-SYSTEMD CHECK .* FAIL' "$log"; then
  echo "systemd-vm: checks failed: $done_line" >&2
  exit 1
fi
checks=$(sed -n 's/.*checks=\([0-9]*\).*/\1/p' <<<"$done_line")
if [[ ${checks:-0} -lt 19 ]]; then
  echo "systemd-vm: only ${checks:-0} checks ran" >&2
  exit 1
fi
echo "systemd-vm: $done_line"
