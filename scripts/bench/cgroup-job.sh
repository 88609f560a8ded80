#!/usr/bin/env bash
# Issue 30's benchmark target: two rayon programs inside one job, under Partita (the Slurm
# rule makes the job's cgroup a partition) against without it (PARTITA=off), paired runs
# alternating which goes first, median wall time of the pair (both programs started together,
# timed until both end). The job is a cgroup v1 cpuset shaped like Slurm's
# (/partita-bench-<pid>/slurm/uid_0/job_1) with CPUS (default: all); each program is
# examples/rayon-par-iter (unmodified rayon on the patch) with THREADS workers (default: the
# machine's CPUs) and ROUNDS rounds.
#   scripts/bench/cgroup-job.sh [PAIRS]      env: CPUS=0 THREADS=2 ROUNDS=4
# Needs root and the v1 cpuset hierarchy at /sys/fs/cgroup/cpuset.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PAIRS=${1:-5}
CPUS=${CPUS:-$(cat /sys/fs/cgroup/cpuset/cpuset.effective_cpus)}
THREADS=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-4}
cargo build -q --release --bin partita
(cd examples/rayon-par-iter && CARGO_TARGET_DIR="$ROOT/target" cargo build -q --release --locked)
RAYON=$ROOT/target/release/rayon-par-iter
CG=/sys/fs/cgroup/cpuset/partita-bench-$$
JOB=$CG/slurm/uid_0/job_1
W=$(mktemp -d)
cleanup() {
  [[ -n ${MGR:-} ]] && kill "$MGR" 2>/dev/null && wait "$MGR" 2>/dev/null
  for d in "$JOB" "$CG/slurm/uid_0" "$CG/slurm" "$CG"; do rmdir "$d" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
for d in "$CG" "$CG/slurm" "$CG/slurm/uid_0" "$JOB"; do
  mkdir "$d"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"$d/cpuset.mems"
  [[ $d == "$JOB" ]] && echo "$CPUS" >"$d/cpuset.cpus" ||
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$d/cpuset.cpus"
done
printf '[[cgroup_rule]]\npreset = "slurm"\n' >"$W/p.toml"
"$ROOT/target/release/partita" serve --config "$W/p.toml" --socket "$W/p.sock" 2>"$W/serve.log" &
MGR=$!
for _ in $(seq 100); do "$ROOT/target/release/partita" status --socket "$W/p.sock" >/dev/null 2>&1 && break; sleep 0.1; done

# One pair inside the job; prints its wall time in ms.
pair() { # partita: on|off
  local env=() s e
  [[ $1 == off ]] && env=(PARTITA=off)
  s=$(date +%s%N)
  for _ in 1 2; do
    sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$JOB" \
      env "${env[@]}" PARTITA_SOCKET="$W/p.sock" RAYON_NUM_THREADS="$THREADS" "$RAYON" "$ROUNDS" >/dev/null &
  done
  wait "$(jobs -p | grep -v "^$MGR$" | head -1)" 2>/dev/null || true
  while [[ -n $(cat "$JOB/cgroup.procs") ]]; do sleep 0.01; done
  e=$(date +%s%N)
  echo $(((e - s) / 1000000))
}
on=() off=()
for i in $(seq "$PAIRS"); do
  if ((i % 2)); then on+=("$(pair on)"); off+=("$(pair off)"); else off+=("$(pair off)"); on+=("$(pair on)"); fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mon=$(median "${on[@]}") moff=$(median "${off[@]}")
echo "job cpus $CPUS, 2 programs x $THREADS threads x $ROUNDS rounds, $PAIRS pairs"
echo "with partita (ms):    ${on[*]}   median $mon"
echo "without partita (ms): ${off[*]}   median $moff"
awk -v a="$mon" -v b="$moff" 'BEGIN { printf "ratio with/without: %.3f\n", a / b }'
