#!/usr/bin/env bash
# The rayon programs of issue 10 on the registry's rayon-core and through the compat patch
# (partita-runtime), interleaved: each round runs every workload once on each runtime, the
# first one alternating between rounds; each run is a fresh process. Prints the median seconds
# and the ratio partita / rayon-core (below 1: partita is faster).
# Usage: compat/bench/run.sh [rounds]   (default 5)
#
# The two binaries hold separate copies of the same inner loops (fib_seq, the sort kernels)
# at different addresses, and on this machine that placement alone moved a loop's time by
# 7-30 % (docs/bench/runtime.md, 2026-11-26). Two ways to measure the runtimes rather than
# where the linker happened to put the loops:
#
# LAYOUTS=N links each side N times with its functions in a different random order (lld's
#   `--shuffle-sections`, seeds 1..N, the same seed on both sides) and runs `rounds` rounds of
#   every layout, all interleaved. The table gives, per workload, the median over layouts of
#   each layout's ratio and their range: a sample of the placement lottery instead of one
#   draw (Mytkowicz et al., "Producing wrong data without doing anything obviously wrong!",
#   ASPLOS 2009; Curtsinger and Berger, "Stabilizer", ASPLOS 2013).
# ALIGN_FUNCTIONS=1 builds both sides with every function 64-byte aligned
#   (`-C llvm-args=-align-all-functions=6`): one fixed draw, the same rule on both sides.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
ROUNDS=${1:-5}
LAYOUTS=${LAYOUTS:-0}
export CARGO_TARGET_DIR=$ROOT/target/rayon-compat-bench
if [[ ${ALIGN_FUNCTIONS:-0} == 1 ]]; then
  export RUSTFLAGS="${RUSTFLAGS:-} -C llvm-args=-align-all-functions=6"
  CARGO_TARGET_DIR+=-aligned
fi
BIN=$CARGO_TARGET_DIR/layouts
mkdir -p "$BIN"
# Layout 0 is the binary as built; layouts 1..N are shuffled links of the same code. Only the
# final crate is relinked (`cargo rustc` passes the flag to it alone).
if ((LAYOUTS == 0)); then SEEDS=(0); else SEEDS=($(seq 1 "$LAYOUTS")); fi
for seed in "${SEEDS[@]}"; do
  for v in stock partita; do
    args=()
    ((seed)) && args=(-- -C "link-arg=-Wl,--shuffle-sections=.text.*=$seed")
    cargo rustc --release --quiet --manifest-path "$v/Cargo.toml" --bin "rayon-bench-$v" "${args[@]}"
    cp "$CARGO_TARGET_DIR/release/rayon-bench-$v" "$BIN/$seed-$v"
  done
done
# Measure the runtimes, not a manager's allocation (a manager running on this machine would
# otherwise register the partita runs).
export PARTITA=off
WORKLOADS=(par_sort map_reduce par_bridge nested_joins)
declare -A times
for ((r = 0; r < ROUNDS; r++)); do
  order=(stock partita)
  ((r % 2)) && order=(partita stock)
  for seed in "${SEEDS[@]}"; do
    for w in "${WORKLOADS[@]}"; do
      for v in "${order[@]}"; do
        times[$seed.$v.$w]+="$("$BIN/$seed-$v" "$w") "
      done
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {print a / b}'; }
echo "rounds: $ROUNDS, layouts: ${LAYOUTS} (0: as built), aligned functions: ${ALIGN_FUNCTIONS:-0}," \
  "threads: ${RAYON_NUM_THREADS:-$(nproc)} (RAYON_NUM_THREADS or CPUs), $(date -u +%F)"
if ((LAYOUTS == 0)); then
  printf '| %-13s | %14s | %14s | %18s | %17s |\n' workload "rayon-core (s)" "partita (s)" \
    "partita/rayon-core" "per-round ratios"
  printf '|%s|%s|%s|%s|%s|\n' --------------- ---------------- ---------------- \
    --------------------: -------------------:
  for w in "${WORKLOADS[@]}"; do
    s=$(median "${times[0.stock.$w]}")
    p=$(median "${times[0.partita.$w]}")
    # The spread of the round-by-round ratios shows how noisy the machine was.
    range=$(paste <(tr ' ' '\n' <<<"${times[0.partita.$w]}" | grep .) \
      <(tr ' ' '\n' <<<"${times[0.stock.$w]}" | grep .) |
      awk 'NR == 1 {lo = hi = $1 / $2} {r = $1 / $2; lo = r < lo ? r : lo; hi = r > hi ? r : hi}
           END {printf "%.2f-%.2f", lo, hi}')
    printf '| %-13s | %14.4f | %14.4f | %18.3f | %17s |\n' "$w" "$s" "$p" "$(ratio "$p" "$s")" "$range"
  done
  exit 0
fi
printf '| %-13s | %14s | %14s | %25s | %18s | %s\n' workload "rayon-core (s)" "partita (s)" \
  "partita/rayon-core median" "range over layouts" "per layout"
printf '|%s|%s|%s|%s|%s|\n' --------------- ---------------- ---------------- \
  ---------------------------: --------------------:
for w in "${WORKLOADS[@]}"; do
  all_s="" all_p="" per=""
  for seed in "${SEEDS[@]}"; do
    all_s+="${times[$seed.stock.$w]} "
    all_p+="${times[$seed.partita.$w]} "
    per+="$(ratio "$(median "${times[$seed.partita.$w]}")" "$(median "${times[$seed.stock.$w]}")") "
  done
  lo=$(tr ' ' '\n' <<<"$per" | grep . | sort -g | head -1)
  hi=$(tr ' ' '\n' <<<"$per" | grep . | sort -g | tail -1)
  printf '| %-13s | %14.4f | %14.4f | %25.3f | %18s | %s\n' "$w" "$(median "$all_s")" \
    "$(median "$all_p")" "$(median "$per")" "$(printf '%.2f-%.2f' "$lo" "$hi")" \
    "$(printf '%.2f ' $per)"
done
