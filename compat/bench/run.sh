#!/usr/bin/env bash
# The rayon programs of issue 10 on the registry's rayon-core and through the compat patch
# (partita-runtime), interleaved: each round runs every workload once on each runtime, the
# first one alternating between rounds; each run is a fresh process. Prints the median seconds
# and the ratio partita / rayon-core (below 1: partita is faster).
# Usage: compat/bench/run.sh [rounds]   (default 5)
#
# ALIGN_FUNCTIONS=1 builds both sides with every function 64-byte aligned
# (`-C llvm-args=-align-all-functions=6`). The two binaries hold separate copies of the same
# inner loops (fib_seq, the sort kernels) at different addresses, and on this machine that
# placement alone moved a loop's time by 7-12% (docs/bench/runtime.md, 2026-11-26); aligning
# both sides the same way measures the runtimes rather than where the linker put the loops.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
ROUNDS=${1:-5}
export CARGO_TARGET_DIR=$ROOT/target/rayon-compat-bench
if [[ ${ALIGN_FUNCTIONS:-0} == 1 ]]; then
  export RUSTFLAGS="${RUSTFLAGS:-} -C llvm-args=-align-all-functions=6"
  CARGO_TARGET_DIR+=-aligned
fi
for v in stock partita; do
  cargo build --release --quiet --manifest-path "$v/Cargo.toml"
done
# Measure the runtimes, not a manager's allocation (a manager running on this machine would
# otherwise register the partita runs).
export PARTITA=off
WORKLOADS=(par_sort map_reduce par_bridge nested_joins)
declare -A times
for ((r = 0; r < ROUNDS; r++)); do
  order=(stock partita)
  ((r % 2)) && order=(partita stock)
  for w in "${WORKLOADS[@]}"; do
    for v in "${order[@]}"; do
      times[$v.$w]+="$("$CARGO_TARGET_DIR/release/rayon-bench-$v" "$w") "
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "rounds: $ROUNDS, aligned functions: ${ALIGN_FUNCTIONS:-0}, threads: ${RAYON_NUM_THREADS:-$(nproc)} (RAYON_NUM_THREADS or CPUs), $(date -u +%F)"
printf '| %-13s | %14s | %14s | %18s | %17s |\n' workload "rayon-core (s)" "partita (s)" \
  "partita/rayon-core" "per-round ratios"
printf '|%s|%s|%s|%s|%s|\n' --------------- ---------------- ---------------- \
  --------------------: -------------------:
for w in "${WORKLOADS[@]}"; do
  s=$(median "${times[stock.$w]}")
  p=$(median "${times[partita.$w]}")
  # The spread of the round-by-round ratios shows how noisy the machine was.
  range=$(paste <(tr ' ' '\n' <<<"${times[partita.$w]}" | grep .) \
    <(tr ' ' '\n' <<<"${times[stock.$w]}" | grep .) |
    awk 'NR == 1 {lo = hi = $1 / $2} {r = $1 / $2; lo = r < lo ? r : lo; hi = r > hi ? r : hi}
         END {printf "%.2f-%.2f", lo, hi}')
  printf '| %-13s | %14.4f | %14.4f | %18.3f | %17s |\n' "$w" "$s" "$p" \
    "$(awk -v a="$p" -v b="$s" 'BEGIN {print a / b}')" "$range"
done
