#!/usr/bin/env bash
# partita-numa extras: the hwloc backend (tests + clippy with the feature) and the real
# two-NUMA-node test in QEMU (TCG). Needs scripts/install-deps (qemu-system-x86,
# busybox-static, libhwloc-dev); the guest kernel is fetched into target/numa-vm/kernel.
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- partita-numa: clippy and tests with --features hwloc"
cargo clippy -p partita-numa --all-targets --features hwloc -- -D warnings
cargo test -p partita-numa --features hwloc

echo "-- partita-numa: two-node VM test"
start=$(date +%s)
PARTITA_NUMA_VM=1 timeout 900 cargo test -p partita-numa-vm --test vm -- --nocapture two_node_vm
echo "-- partita-numa: VM test took $(( $(date +%s) - start ))s"
