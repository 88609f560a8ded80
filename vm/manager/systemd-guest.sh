#!/bin/sh
# The systemd guest's checks (run by partita-vm-test.service, see systemd-rootfs.sh; packed by
# vm/manager/systemd-run.sh): the Debian package under a real systemd with cgroup v2.
# One line per check, `PARTITA-SYSTEMD CHECK <name> PASS|FAIL t=<uptime> <detail>`, then
# `PARTITA-SYSTEMD DONE checks=<n> failed=<m>`; measurements as `PARTITA-SYSTEMD MEASURE`.
P=/mnt/payload
SOCK=/run/partita/partita.sock
SVC_CG=/sys/fs/cgroup/system.slice/partita.service
KILLS=${KILLS:-10}
checks=0
failed=0
echo "PARTITA-SYSTEMD BOOTED $(uname -r) pid1=$(cat /proc/1/comm) $(stat -fc %T /sys/fs/cgroup) $(systemd-analyze time 2>/dev/null | head -1)"
check() { # name detail command...
  name=$1 detail=$2
  shift 2
  checks=$((checks + 1))
  t=$(cut -d' ' -f1 /proc/uptime)
  if "$@"; then
    echo "PARTITA-SYSTEMD CHECK $name PASS t=${t}s $detail"
  else
    echo "PARTITA-SYSTEMD CHECK $name FAIL t=${t}s $detail"
    failed=$((failed + 1))
    journalctl -u partita -u partita.socket --no-pager -n 30 -o cat 2>&1 | sed 's/^/  journal: /'
  fi
}
uptime_ds() { cut -d' ' -f1 /proc/uptime | tr -d .; } # in 1/100 s
wait_for() { # seconds command...: poll every 0.1 s for that long (guest clock)
  end=$(( $(uptime_ds) + $1 * 100 ))
  shift
  while [ "$(uptime_ds)" -lt $end ]; do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}
prop() { systemctl show -p "$1" --value partita.service; }
active() { [ "$(systemctl is-active "${1:-partita.service}")" = active ]; }
mask() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
confined() { m=$(mask "$1"); [ -n "$m" ] && [ "$m" != "$ALL" ]; }
restored() { [ "$(mask "$1")" = "$ALL" ]; }
# Directories of managers other than the running one ($1: its pid, or none), anywhere.
stray_dirs() { find /sys/fs/cgroup -type d -name 'partita-mgr-*' ! -name "partita-mgr-${1:-none}-*" 2>/dev/null; }
no_strays() { [ -z "$(stray_dirs "$1")" ]; }
no_journal_of() { [ -z "$(ls /run/partita/partita-mgr-"$1"-* 2>/dev/null)" ]; }
ready_ms() { # start to READY=1 of the current main process, guest monotonic clock
  s=$(prop ExecMainStartTimestampMonotonic) r=$(prop ActiveEnterTimestampMonotonic)
  echo $(( (r - s) / 1000 ))
}
start_run() { # a program confined to partition batch (1 CPU); sets RPID. It sleeps: a
  # busy one would starve the TCG guest, and confinement does not depend on it.
  partita run --partition batch -- sleep 3600 2>>/tmp/run.log &
  RPID=$!
  wait_for 60 confined $RPID
}
ALL=$(cat /sys/devices/system/cpu/online)

# --- install ---------------------------------------------------------------------------
t0=$(date +%s%N)
dpkg -i $P/partita.deb >/tmp/dpkg.log 2>&1
check dpkg-install "$(tail -1 /tmp/dpkg.log) ($(( ($(date +%s%N) - t0) / 1000000 )) ms)" \
  sh -c 'dpkg -s partita | grep -q "Status: install ok installed"'
check sysusers-group "$(getent group partita)" eval "getent group partita >/dev/null"
check conffile "$(dpkg-query -W -f='${Conffiles}' partita | tr -s ' ' | head -c 80)" \
  sh -c "dpkg-query -W -f='\${Conffiles}' partita | grep -q /etc/partita/partita.toml"
useradd -m -G partita alice
useradd -m bob
cat >> /etc/partita/partita.toml <<'TOML'

[[partition]]
name = "batch"
cpus = 1
members = { names = [], uids = [], gids = [], hint = true }
TOML

# --- enable --now ----------------------------------------------------------------------
systemctl enable --now partita >/tmp/enable.log 2>&1
check enable-now "$(systemctl is-active partita) socket=$(systemctl is-active partita.socket) enabled=$(systemctl is-enabled partita)" \
  eval 'active && active partita.socket && [ "$(systemctl is-enabled partita)" = enabled ]'
echo "PARTITA-SYSTEMD MEASURE ready_ms=$(ready_ms) (first start, ExecMainStart to READY=1)"
check socket-mode "$(stat -c '%A %U:%G' $SOCK)" sh -c "[ \"\$(stat -c '%a %G' $SOCK)\" = '660 partita' ]"
check notify-type "Type=$(prop Type) WatchdogUSec=$(prop WatchdogUSec) Delegate=$(prop Delegate)" \
  eval '[ "$(prop Type)" = notify ] && [ "$(prop Delegate)" = yes ]'
conf=$(partita status --json | sed -n 's/.*"confinement": "\(.*\)".*/\1/p')
check delegated-cgroup-v2 "confinement=$conf controllers=$(cat $SVC_CG/cgroup.controllers 2>/dev/null)" \
  sh -c "[ '$conf' = cgroup-v2 ] && grep -qw cpuset $SVC_CG/cgroup.controllers"
check logs-plain "no ANSI escapes in journalctl -u partita" \
  sh -c "! journalctl -u partita -o cat --no-pager | grep -q \"$(printf '\033')\""

# --- a user in group partita registers; a user outside it runs standalone --------------
runuser -u alice -- partita probe --name alice-probe --pool 2 --demand 2 >/tmp/alice.log 2>&1 &
APID=$!
AUID=$(id -u alice)
registered() { partita status --json | tr -d ' \n' | grep -q "\"uid\":$AUID,\"name\":\"alice-probe\""; }
wait_for 60 registered
check alice-registers "uid=$AUID $(partita status | grep alice-probe | tr -s ' ' | head -c 100)" registered
# Its two spinning workers would starve the TCG guest: it comes back for the stop check.
kill $APID
wait $APID 2>/dev/null
bob_status=$(runuser -u bob -- partita status 2>&1)
bob_rc=$?
check bob-told-why "$bob_status" sh -c "[ $bob_rc -ne 0 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) -eq 1 ] &&
  printf '%s' \"\$1\" | grep -q $SOCK && printf '%s' \"\$1\" | grep -q 'group partita'" _ "$bob_status"
runuser -u bob -- partita probe --name bob-probe --pool 2 --demand 2 --seconds 2 >/tmp/bob.log 2>&1
bob_probe=$?
check bob-standalone "exit=$bob_probe $(grep -c . /tmp/bob.log) lines, last target: $(grep -o 'target=[0-9]*' /tmp/bob.log | tail -1)" \
  sh -c "[ $bob_probe -eq 0 ] && [ \"\$(grep -o 'target=[0-9]*' /tmp/bob.log | tail -1)\" = target=2 ] &&
    ! partita status --json | grep -q bob-probe"

# --- SIGKILL the manager while a program is confined, $KILLS times -----------------------
# One `systemctl show` per poll (each costs a good part of a second under TCG).
state() { eval "$(systemctl show -p NRestarts -p MainPID -p ActiveState partita.service)"; }
restarted() { state; [ "$NRestarts" -gt "$n0" ] && [ "$MainPID" != "$old" ] && [ "$MainPID" != 0 ] && [ "$ActiveState" = active ]; }
ok=0
max_ready=0
i=1
while [ $i -le $KILLS ]; do
  t_run=$(uptime_ds)
  start_run
  was_confined=$(mask $RPID)
  state
  old=$MainPID n0=$NRestarts
  t_kill=$(uptime_ds)
  systemctl kill --kill-whom=main -s KILL partita
  wait_for 60 restarted
  t_up=$(uptime_ds)
  new=$MainPID
  r=$(ready_ms)
  [ "$r" -gt "$max_ready" ] && max_ready=$r
  if restarted && wait_for 10 restored $RPID && no_strays "$new" && no_journal_of "$old"; then
    ok=$((ok + 1))
    echo "  kill $i: manager $old -> $new, mask $was_confined -> $(mask $RPID); confined in $(( (t_kill - t_run) * 10 )) ms, active again $(( (t_up - t_kill) * 10 )) ms after the kill, ExecMainStart to READY=1 ${r} ms"
  else
    tail -2 /tmp/run.log | sed "s/^/  run: /"
    echo "  kill $i: restarted=$(restarted && echo yes || echo no) mask=$(mask $RPID) (was $was_confined) strays=$(stray_dirs "$new" | tr '\n' ' ') journals=$(ls /run/partita)"
  fi
  kill $RPID 2>/dev/null
  wait $RPID 2>/dev/null
  i=$((i + 1))
done
check kill-restart-undo "$ok of $KILLS kills: restarted, masks back, no dead manager's cgroup or journal left" [ $ok -eq "$KILLS" ]
echo "PARTITA-SYSTEMD MEASURE restart_ready_ms_max=$max_ready (over $KILLS restarts, ExecMainStart to READY=1)"
journalctl -u partita -o short-monotonic --no-pager | tail -n 12 | sed 's/^/  last restart: /'

# --- a configuration error: the unit fails at once, the key in the journal ---------------
cp /etc/partita/partita.toml /tmp/good.toml
sed -i 's/^realloc_period_ms = .*/realloc_period_ms = 0/' /etc/partita/partita.toml
systemctl restart partita 2>/dev/null
sleep 3 # RestartSec=1s: a restart loop would have started by now
check bad-config-fails "state=$(systemctl is-active partita) status=$(prop ExecMainStatus) restarts=$(prop NRestarts) log: $(journalctl -u partita -o cat --no-pager | grep realloc_period_ms | tail -1)" \
  eval '[ "$(systemctl is-active partita)" = failed ] && [ "$(prop ExecMainStatus)" = 78 ] &&
    [ "$(prop NRestarts)" = 0 ] && journalctl -u partita -o cat --no-pager | grep -q realloc_period_ms'
cp /tmp/good.toml /etc/partita/partita.toml
systemctl reset-failed partita
systemctl start partita
check good-config-again "$(systemctl is-active partita)" active

# --- systemctl stop: programs standalone at once, nothing left ---------------------------
start_run
runuser -u alice -- partita probe --name alice-probe --pool 2 --demand 1 --task-us 200 >/tmp/alice.log 2>&1 &
APID=$!
wait_for 60 registered
alice_lines=$(grep -c . /tmp/alice.log)
# The service alone: its programs see the manager go (a program that connects again starts
# it again through partita.socket, as it should).
systemctl stop partita 2>/dev/null
alice_standalone() { tail -n +$((alice_lines + 1)) /tmp/alice.log | grep -q 'target=2'; }
check stop-alice-standalone "alice's probe after the stop: $(tail -n +$((alice_lines + 1)) /tmp/alice.log | head -1)" wait_for 10 alice_standalone
# Both units: nothing left.
systemctl stop partita.socket partita.service
check stop-nothing-left "service=$(systemctl is-active partita) socket=$(systemctl is-active partita.socket) mask=$(mask $RPID) strays=$(stray_dirs | wc -l) journals=$(ls /run/partita 2>/dev/null | grep -c journal) socket-file=$(ls $SOCK 2>/dev/null)" \
  eval '! active && ! active partita.socket && restored $RPID && no_strays && [ ! -e $SOCK ] &&
    [ -z "$(ls /run/partita 2>/dev/null | grep journal)" ] && [ -z "$(ls $SVC_CG 2>/dev/null | grep partita-mgr)" ]'
kill $RPID $APID 2>/dev/null
wait $RPID $APID 2>/dev/null
systemctl start partita.socket
check socket-activates "partita status with only the socket listening starts the manager: $(partita status >/dev/null 2>&1; systemctl is-active partita)" \
  eval 'partita status >/dev/null && active'

# --- sandbox ------------------------------------------------------------------------------
exposure=$(systemd-analyze security partita.service 2>/dev/null | tail -1)
echo "PARTITA-SYSTEMD MEASURE exposure: $exposure"
check exposure-ok "$exposure" sh -c "printf '%s' '$exposure' | grep -Eq 'level for partita.service: ([0-2]\.[0-9]|3\.0) '"

# --- apt-get remove: nothing left running --------------------------------------------------
start_run
t_rm=$(uptime_ds)
apt-get remove -y partita >/tmp/remove.log 2>&1
check apt-remove "rc=$? in $(( ($(uptime_ds) - t_rm) * 10 )) ms serve=$(pgrep -fc 'partita serve') socket=$(systemctl is-active partita.socket) mask=$(mask $RPID) /run/partita=$(ls -d /run/partita 2>/dev/null)" \
  eval '! pgrep -f "partita serve" >/dev/null && ! active partita.socket && ! active &&
    restored $RPID && no_strays && [ ! -e /run/partita ] && [ ! -e /lib/systemd/system/partita.service ]'
kill $RPID $APID 2>/dev/null
echo "PARTITA-SYSTEMD DONE checks=$checks failed=$failed"
# Power off at once: the root disk is a throw-away snapshot, a clean shutdown only costs time.
sync
echo o > /proc/sysrq-trigger
