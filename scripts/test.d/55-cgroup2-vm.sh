#!/usr/bin/env bash
# The manager's cpuset confinement on cgroup v2, for real: CI hosts have cpuset bound to
# cgroup v1, so this boots a two-CPU QEMU guest (TCG) with the unified hierarchy and runs
# `partita serve` (cgroups = true), `partita run` and a probe application in it; see
# vm/manager/cgroup2-guest.sh for the checks. Needs scripts/install-deps
# (qemu-system-x86, busybox-static); the kernel is the NUMA VM test's (fetched once).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- partita-manager: cgroup v2 VM test"
start=$(date +%s)
cargo build -q --bin partita
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
vm/manager/cgroup2-run.sh target/debug/partita | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "-- partita-manager: cgroup v2 VM test took $(( $(date +%s) - start ))s"
if [[ $rc -ne 0 ]]; then
  echo "cgroup2-vm: the VM failed (exit $rc)" >&2
  exit 1
fi
done_line=$(grep -a '^PARTITA-CG2 DONE' "$log" | tr -d '\r' || true)
if [[ -z $done_line ]]; then
  echo "cgroup2-vm: the guest did not finish" >&2
  exit 1
fi
if [[ $done_line != *" failed=0" ]] || grep -aq '^PARTITA-CG2 CHECK .* FAIL' "$log"; then
  echo "cgroup2-vm: checks failed: $done_line" >&2
  exit 1
fi
checks=$(sed -n 's/.*checks=\([0-9]*\).*/\1/p' <<<"$done_line")
if [[ ${checks:-0} -lt 25 ]]; then
  echo "cgroup2-vm: only ${checks:-0} checks ran" >&2
  exit 1
fi
echo "cgroup2-vm: $done_line"
