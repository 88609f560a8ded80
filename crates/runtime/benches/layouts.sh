#!/usr/bin/env bash
# The runtime benchmark's interleaved table (partita against rayon-core, runtime.rs), over N
# link layouts: the bench binary is linked N times with its functions in a different random
# order (lld's `--shuffle-sections`, seeds 1..N; lld is rustc's default linker on
# x86_64-unknown-linux-gnu), each layout runs the table once, and the script prints every
# layout's ratios and, per benchmark, their median and range.
#
# Why: the binary holds one copy of each kernel per runtime (fib, the sorts) at different
# addresses, and where the linker put a loop moved its time by 7-30 % on this machine, on
# identical code (docs/bench/runtime.md, 2026-11-26). One build is one draw of that lottery;
# the median over layouts measures the runtimes (Mytkowicz et al., ASPLOS 2009; Curtsinger
# and Berger, "Stabilizer", ASPLOS 2013).
# Usage: crates/runtime/benches/layouts.sh [layouts]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/../../.."
N=${1:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for seed in $(seq 1 "$N"); do
  exe=$(cargo rustc --release --quiet -p partita-runtime --bench runtime --message-format=json \
    -- -C "link-arg=-Wl,--shuffle-sections=.text.*=$seed" |
    grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
  echo "layout $seed ($exe)"
  # Only the interleaved table: the process-control measurements and criterion's groups do
  # not compare the two runtimes.
  "$exe" --noplot no_such_bench | tee /dev/stderr | grep '^| [a-z]' | grep -v '^| benchmark' |
    awk -v s="$seed" -F'|' '{gsub(/ /, "", $2); gsub(/ /, "", $5); print s, $2, $5}' >>"$out"
done 2>&1 | grep -v '^Gnuplot\|^$' >&2
echo
echo "layouts: $N, $(date -u +%F), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| benchmark | median over layouts (partita / rayon-core) | range | per layout, sorted |"
echo "|---|---:|---:|---|"
for b in $(awk '{print $2}' "$out" | awk '!seen[$0]++'); do
  awk -v b="$b" '$2 == b {print $3}' "$out" | sort -g | awk -v b="$b" '
    {a[NR] = $1; all = all sprintf("%.2f ", $1)}
    END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
         printf "| %s | %.2f | %.2f-%.2f | %s|\n", b, m, a[1], a[NR], all}'
done
