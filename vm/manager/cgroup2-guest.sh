#!/bin/busybox sh
# The guest's /init for the cgroup v2 test (packed by vm/manager/cgroup2-run.sh): mounts
# the unified hierarchy, delegates cpuset to a service cgroup /svc the way systemd would (the
# root's subtree_control), moves itself there, and runs `partita serve` with cgroups = true
# from it. Checks, one line each (`PARTITA-CG2 CHECK <name> PASS|FAIL <detail>`), then
# `PARTITA-CG2 DONE checks=<n> failed=<m>` and power off:
# - a `partita run` program (two busy threads) lands in svc/partita-mgr-<pid>-<start>/batch
#   and that cgroup's cpuset.cpus is the partition's allocation, alone (both CPUs), beside a
#   probe application (one CPU) and after it left (both again);
# - after SIGTERM: the program is back in /svc with its children, no partita-mgr-* remains,
#   svc's subtree_control no longer has the +cpuset the manager added, no journal remains;
# - after SIGKILL: all of it is still there, and a new manager's start undoes it (journal);
# - a probe in a kubepods.slice pod cgroup (cpuset 1, cpu.max one CPU) under a manager with
#   the kubernetes rule: one partition with the pod's cgroup and cpuset, capped at one CPU,
#   the probe's threads on CPU 1 only, the partition gone with the probe.
# The checks fail without the journal (nothing undoes +cpuset) and without reading
# cgroup.threads (threaded cgroups refuse to list cgroup.procs: nothing could be removed).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo "PARTITA-CG2 BOOTED $(uname -r) cpus=$(cat /sys/devices/system/cpu/online)"

CG=/sys/fs/cgroup
SVC=$CG/svc
SOCK=/run/p.sock
checks=0
failed=0
check() { # name detail command...
  name=$1 detail=$2
  shift 2
  checks=$((checks + 1))
  t=$(cut -d' ' -f1 /proc/uptime)
  if "$@"; then
    echo "PARTITA-CG2 CHECK $name PASS t=${t}s $detail"
  else
    echo "PARTITA-CG2 CHECK $name FAIL t=${t}s $detail"
    failed=$((failed + 1))
    [ -n "$dumped" ] || dump
    dumped=1
  fi
}
dump() {
  echo "--- serve log"; cat /tmp/serve.log
  echo "--- run log"; cat /tmp/run.log
  echo "---"
}
# wait_for SECONDS command...: poll every 0.1 s.
wait_for() {
  n=$(($1 * 10))
  shift
  while [ $n -gt 0 ]; do
    "$@" && return 0
    sleep 0.1
    n=$((n - 1))
  done
  "$@"
}

echo +cpuset > $CG/cgroup.subtree_control
mkdir $SVC
echo $$ > $SVC/cgroup.procs
cat > /tmp/p.toml <<'EOF'
uncontrolled = "tracked"
cgroups = true
realloc_period_ms = 300
[[partition]]
name = "batch"
EOF

# The batch partition's CPUs per the manager's status, as a comma list ("0,1").
status_cpus() {
  partita status --json --socket $SOCK 2>/dev/null | awk '
    /"name": "batch"/ { inb = 1 }
    inb && /"uncontrolled_cpus": \[\]/ { print ""; exit }
    inb && /"uncontrolled_cpus": \[/ { inl = 1; next }
    inl && /\]/ { print out; exit }
    inl { gsub(/[ ,]/, ""); out = out (out == "" ? "" : ",") $0 }'
}
# A cpuset list file ("0-1", "1") as a comma list.
expand() {
  awk -F, '{ out = ""; for (i = 1; i <= NF; i++) { n = split($i, r, "-");
      lo = r[1]; hi = (n == 2 ? r[2] : r[1]);
      for (c = lo; c <= hi; c++) out = out (out == "" ? "" : ",") c }
    print out }' "$1"
}
serve() {
  partita serve --config /tmp/p.toml --socket $SOCK 2>>/tmp/serve.log &
  MPID=$!
  wait_for 30 partita status --socket $SOCK >/dev/null 2>&1
}
in_cgroup() { # pid path
  [ "$(cat /proc/$1/cgroup 2>/dev/null)" = "0::$2" ]
}
mgr_dirs() { ls -d $SVC/partita-mgr-* 2>/dev/null; }
no_mgr_dirs() { [ -z "$(mgr_dirs)" ]; }
no_cpuset_in_svc() { ! grep -qw cpuset $SVC/cgroup.subtree_control; }
no_journal() { [ -z "$(ls /run/*.journal 2>/dev/null)" ]; }
follows() { # expected-or-empty: batch's cgroup cpuset.cpus = status's, and = expected
  s=$(status_cpus)
  c=$(expand $BATCH/cpuset.cpus 2>/dev/null)
  [ -n "$s" ] && [ "$s" = "$c" ] && { [ -z "$1" ] || [ "$s" = "$1" ]; }
}
start_run() {
  partita run --partition batch --socket $SOCK -- \
    sh -c 'yes > /dev/null & yes > /dev/null & wait' 2>>/tmp/run.log &
  RPID=$!
  wait_for 30 sh -c "grep -q partita-mgr-$MPID- /proc/$RPID/cgroup 2>/dev/null"
}

# --- 1: confinement follows the allocation; a clean exit undoes everything -------------
serve
start_run
MGR=$(mgr_dirs)
BATCH=$MGR/batch
check v2-confinement "$(partita status --socket $SOCK | grep -i confinement | tr -s ' ')" \
  sh -c "partita status --json --socket $SOCK | grep -q '\"confinement\": \"cgroup-v2\"'"
check run-in-partition-cgroup "$(cat /proc/$RPID/cgroup)" in_cgroup $RPID "/svc/${MGR##*/}/batch"
check subtree-cpuset-added "$(cat $SVC/cgroup.subtree_control)" grep -qw cpuset $SVC/cgroup.subtree_control
wait_for 30 follows 0,1
check follows-alone "status=$(status_cpus) cgroup=$(cat $BATCH/cpuset.cpus)" follows 0,1
partita probe --pool 2 --demand 2 --socket $SOCK > /dev/null 2>>/tmp/probe.log &
PROBE=$!
registered() { partita status --json --socket $SOCK | grep -q "\"pid\": $PROBE,"; }
one_cpu() { follows 0 || follows 1; }
wait_for 120 registered
check probe-registered "pid=$PROBE" registered
wait_for 30 one_cpu
check follows-shared "status=$(status_cpus) cgroup=$(cat $BATCH/cpuset.cpus)" one_cpu
kill -TERM $PROBE
wait $PROBE
wait_for 30 follows 0,1
check follows-after-probe "status=$(status_cpus) cgroup=$(cat $BATCH/cpuset.cpus)" follows 0,1
CHILD=$(cat /proc/$RPID/task/*/children | awk '{print $1}')
check child-in-partition "$(cat /proc/$CHILD/cgroup 2>/dev/null)" in_cgroup "$CHILD" "/svc/${MGR##*/}/batch"
kill -TERM $MPID
wait $MPID
check term-run-back "$(cat /proc/$RPID/cgroup)" in_cgroup $RPID /svc
check term-child-back "$(cat /proc/$CHILD/cgroup)" in_cgroup "$CHILD" /svc
check term-no-cgroups "$(mgr_dirs)" no_mgr_dirs
check term-subtree-undone "$(cat $SVC/cgroup.subtree_control)" no_cpuset_in_svc
check term-no-journal "$(ls /run)" no_journal
kill -TERM $RPID $CHILD $(cat /proc/$RPID/task/*/children 2>/dev/null) 2>/dev/null

# --- 2: SIGKILL, then the next manager's start undoes what the dead one left -------------
serve
start_run
DEAD=$(mgr_dirs)
DEADPID=$MPID
wait_for 10 sh -c "[ -n \"\$(cat /proc/$RPID/task/*/children)\" ]"
CHILD=$(cat /proc/$RPID/task/*/children | awk '{print $1}')
kill -KILL $MPID
wait $MPID 2>/dev/null
dead_journal() { ls /run/partita-mgr-$DEADPID-*.journal 2>/dev/null; }
check kill-left-cgroup "$DEAD" sh -c "[ -d '$DEAD' ] && grep -q '${DEAD##*/}' /proc/$RPID/cgroup"
check kill-left-journal "$(cat $(dead_journal) 2>/dev/null | tr '\n' ';')" [ -n "$(dead_journal)" ]
serve
check restart-swept-cgroup "$(mgr_dirs)" [ ! -d "$DEAD" ]
check restart-run-back "$(cat /proc/$RPID/cgroup)" in_cgroup $RPID /svc
check restart-child-back "$(cat /proc/$CHILD/cgroup)" in_cgroup "$CHILD" /svc
check restart-subtree-undone "$(cat $SVC/cgroup.subtree_control)" no_cpuset_in_svc
check restart-journal-gone "$(ls /run)" [ -z "$(dead_journal)" ]
kill -TERM $MPID
wait $MPID
all_clean() { no_mgr_dirs && no_journal; }
check final-nothing-left "$(mgr_dirs) $(ls /run/*.journal 2>/dev/null)" all_clean
kill -TERM $RPID $(cat /proc/$RPID/task/*/children 2>/dev/null) 2>/dev/null

# --- 4: a pod's cgroup makes a partition (issue 30): kubepods.slice layout, systemd driver --
U=0b5e2a2c_1111_4a7e_bb0c_1234567890ab
POD=$CG/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$U.slice
CTR=$POD/cri-containerd-0a1b.scope
echo +cpu > $CG/cgroup.subtree_control
for d in kubepods.slice kubepods.slice/kubepods-burstable.slice \
  kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$U.slice; do
  mkdir -p $CG/$d
  echo "+cpuset +cpu" > $CG/$d/cgroup.subtree_control
done
mkdir -p $CTR
echo 1 > $POD/cpuset.cpus
echo "100000 100000" > $POD/cpu.max
printf 'uncontrolled = "tracked"\ncgroups = false\n[[cgroup_rule]]\npreset = "kubernetes"\n' > /tmp/k.toml
partita serve --config /tmp/k.toml --socket /run/k.sock 2>>/tmp/serve.log &
KPID=$!
wait_for 30 partita status --socket /run/k.sock >/dev/null 2>&1
sh -c "echo \$\$ > $CTR/cgroup.procs && exec partita probe --pool 2 --demand 2 --socket /run/k.sock" \
  >/dev/null 2>>/tmp/probe.log &
KPROBE=$!
pod_line() { partita status --socket /run/k.sock 2>/dev/null | grep "k8s-pod-$U cgroup:"; }
pod_row() { partita status --socket /run/k.sock 2>/dev/null | grep -E "^k8s-pod-$U +1cpu "; }
masks_in_1() { # every thread of the probe on CPU 1 only
  for th in /proc/$KPROBE/task/*; do
    [ "$(awk '/Cpus_allowed_list/ { print $2 }' $th/status)" = 1 ] || return 1
  done
}
wait_for 30 pod_line >/dev/null
pod_cpuset_1() { pod_line | grep -q "kubepods-burstable-pod$U.slice cpus \\[1\\]"; }
check v2-pod-partition "$(pod_line)" pod_cpuset_1
check v2-pod-quota "$(pod_row | tr -s ' ')" pod_row
check v2-pod-masks "$(cat /proc/$KPROBE/task/*/status | grep Cpus_allowed_list | tr -s '\t\n' ' ')" masks_in_1
kill -KILL $KPROBE
wait $KPROBE 2>/dev/null
no_pod() { [ -z "$(pod_line)" ]; }
wait_for 30 no_pod
check v2-pod-gone "$(pod_line)" no_pod
kill -TERM $KPID
wait $KPID

echo "PARTITA-CG2 DONE checks=$checks failed=$failed"
sync
poweroff -f
