#!/usr/bin/env bash
# Partitions from cgroups with a real Slurm (issue 30 item 2): a one-node cluster on this
# machine (slurmctld + slurmd from Debian's slurm-wlm 22.05, munge, proctrack/cgroup and
# task/cgroup on the host's cgroup v1), `partita serve` with the ready-made Slurm rule, and two
# jobs sharing the node, each running two unmodified rayon programs (examples/rayon-par-iter,
# on Partita through the rayon-core patch) with more threads than the job has CPUs.
# scripts/slurm/check.py samples `partita status --json` and the programs' threads while
# they run and checks the issue's targets; it prints one line per check. Needs
# scripts/install-deps (slurmd slurmctld slurm-client munge python3); everything runs as
# root in a private directory, on private ports and a private munge socket.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

echo "-- partita-manager: Slurm test"
start=$(date +%s)
for b in slurmctld slurmd sbatch munged python3; do
  command -v "$b" >/dev/null || { echo "slurm: $b is missing (scripts/install-deps)" >&2; exit 1; }
done
if [[ $(id -u) -ne 0 ]]; then
  echo "slurm: needs root (slurmd makes the jobs' cgroups)" >&2
  exit 1
fi
if [[ ! -w /sys/fs/cgroup/cpuset/cpuset.cpus || ! -d /sys/fs/cgroup/freezer ]]; then
  echo "slurm: needs the cgroup v1 cpuset and freezer hierarchies at /sys/fs/cgroup" >&2
  exit 1
fi
ncpu=$(nproc)
if ((ncpu < 2)); then
  echo "slurm: needs at least 2 CPUs (two jobs of $((ncpu / 2)) CPUs)" >&2
  exit 1
fi
cargo build -q --bin partita
# A real rayon program on the patch (another workspace; in the main target directory, where
# the release builds of 30-runtime.sh left the dependencies they share).
(cd examples/rayon-par-iter && CARGO_TARGET_DIR="$ROOT/target" cargo build -q --release --locked)
RAYON="$ROOT/target/release/rayon-par-iter"
built=$(date +%s)

W=$(mktemp -d /tmp/partita-slurm.XXXXXX)
chmod 755 "$W"
mkdir -p "$W/munge" "$W/state" "$W/spool" "$W/log"
chown munge:munge "$W/munge"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if ((rc != 0)); then
    echo "slurm: failed; the daemons' logs:" >&2
    tail -n 30 "$W"/log/* >&2 || true
  fi
  rm -rf "$W"
}
trap cleanup EXIT

setpriv --reuid munge --regid munge --init-groups /usr/sbin/munged -F \
  --socket "$W/munge/munge.sock" --pid-file "$W/munge/munged.pid" \
  --log-file "$W/munge/munged.log" --seed-file "$W/munge/munged.seed" &
pids+=($!)

host=$(hostname -s)
half=$((ncpu / 2))
cat >"$W/slurm.conf" <<CONF
ClusterName=partita
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$W/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$ncpu State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
cat >"$W/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
CONF
export SLURM_CONF=$W/slurm.conf
for _ in $(seq 100); do [[ -S $W/munge/munge.sock ]] && break; sleep 0.1; done
slurmctld -D >"$W/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D >"$W/log/slurmd.out" 2>&1 &
pids+=($!)

cat >"$W/partita.toml" <<CONF
# The shipped defaults and the ready-made Slurm rule (dist/partita.toml shows it).
[[cgroup_rule]]
preset = "slurm"
CONF
target/debug/partita serve --config "$W/partita.toml" --socket "$W/partita.sock" \
  >"$W/log/partita.log" 2>&1 &
pids+=($!)

for _ in $(seq 300); do
  sinfo -h -o %t 2>/dev/null | grep -qx idle && break
  sleep 0.1
done
sinfo -h -o %t | grep -qx idle || { echo "slurm: the node did not come up: $(sinfo 2>&1)" >&2; exit 1; }
ready=$(date +%s)

python3 scripts/slurm/check.py --partita target/debug/partita --socket "$W/partita.sock" \
  --rayon "$RAYON" --cpus "$half" --dir "$W" --threads "$ncpu" | tee "$W/check.log"
rc=${PIPESTATUS[0]}
end=$(date +%s)
echo "-- partita-manager: Slurm test took $((end - start))s" \
  "(builds $((built - start))s, daemons $((ready - built))s, jobs $((end - ready))s)"
exit "$rc"
