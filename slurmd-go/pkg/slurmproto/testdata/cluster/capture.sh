#!/usr/bin/env bash
# Captures golden frames from real Slurm 24.11.5 / 26.05.5 daemons (the Debian
# chroots of scripts/chroots.sh): slurmctld and two stock slurmd nodes under
# strace, driven by that release's client commands as root and as the
# ordinary user tieegold (uid/gid 1002). See ../README.md.
#
#   capture.sh session REL AUTH PORT   REL 24.11|26.05, AUTH munge|slurm,
#                                      PORT: slurmctld's; nodes n1/n2 on PORT+1/+2
#   capture.sh cross PORT              26.05 slurmctld + 26.05 clients, 24.11 slurmd nodes
#   capture.sh recut DIR               goldencap and credpayload.py again over DIR's traces
#   capture.sh negotiation PORT        22.05 slurmd -> 24.11/26.05 slurmctld; probes of
#                                      0x2600/0x2A00/0x2D00 registrations to 22.05/24.11/26.05
#   capture.sh bcast2205 PORT          the host's 22.05 slurmctld and slurmd, a user job's sbcast
#   capture.sh callerid REL PORT       REL 22.05 (the host's), 24.11 or 26.05: scontrol callerid
#                                      to n1 for a job's TCP connection and for none
#   capture.sh stepmgr REL AUTH PORT   enable_stepmgr: the first node's REQUEST_LAUNCH_PROLOG
#                                      with the job buffers (24.11, 26.05)
#   capture.sh gres REL PORT CGROUP    REL 22.05 (the host's), 24.11 or 26.05; CGROUP yes
#                                      (task/cgroup, ConstrainDevices=yes) or no (task/none):
#                                      n1 with 4 static GPUs and 8 shards, the GRES jobs'
#                                      credentials, environments and device opens
#   capture.sh gres-select DIR         gres's selection into DIR/golden again
#
# Output: /tmp/golden-<rel>-<auth>/ (slurm.conf, logs, trace-*, out/ = goldencap's
# frames, out/*.cred-payload = the signed bytes of each job credential).
#
# Every daemon and client runs in one private mount namespace (a holder
# process) whose own tmpfs covers the chroot's /run/slurm and /run/slurmctld:
# auth/slurm's SACK sockets sit at those fixed paths, and other clusters in
# the same chroot must not see ours (nor we theirs). The munge sessions use
# a munged of their own (throw-away key, socket under /tmp/golden-munge),
# named in slurm.conf by AuthInfo=socket=. The munged outlives the run: it
# is started with fds 3 and 9 closed so that it cannot keep a lock the run
# was started under (run it as `flock -o /tmp/tiee-cluster.lock capture.sh ...`).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../../../../.." && pwd)
CHROOTS=${TIEE_CHROOT_DIR:-/var/lib/tiee/chroots}
MUNGE_DIR=/tmp/golden-munge
MUNGE_SOCK=$MUNGE_DIR/munge.socket
GUSER=tieegold
GUID=1002
# 24.11 sends with writev and its conmgr reads with read: more calls than the
# 22.05 captures needed; -yy tells sockets from files (goldencap keeps TCP only).
ST_CALLS=read,write,readv,writev,sendto,recvfrom,sendmsg,recvmsg,connect,accept,accept4,close
ST=(strace -ff -yy -xx -s 1000000 -e "trace=$ST_CALLS")

log() { printf '%s capture: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# wait_for DESC TIMEOUT_S CMD...: poll CMD every 0.5 s until it succeeds.
wait_for() {
  local desc=$1 limit=$2 t0=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - t0 < limit)) || die "timed out after ${limit}s waiting for $desc"
    sleep 0.5
  done
  log "$desc after $((SECONDS - t0))s"
}

ensure_munged() {
  if [ -S $MUNGE_SOCK ] && munge -S $MUNGE_SOCK -n | unmunge -S $MUNGE_SOCK >/dev/null 2>&1; then
    return
  fi
  mkdir -p $MUNGE_DIR
  [ -s $MUNGE_DIR/munge.key ] || dd if=/dev/urandom of=$MUNGE_DIR/munge.key bs=1024 count=1 status=none
  chown munge:munge $MUNGE_DIR $MUNGE_DIR/munge.key
  chmod 0400 $MUNGE_DIR/munge.key
  runuser -u munge -- /usr/sbin/munged --socket=$MUNGE_SOCK --key-file=$MUNGE_DIR/munge.key \
    --pid-file=$MUNGE_DIR/munged.pid --log-file=$MUNGE_DIR/munged.log --seed-file=$MUNGE_DIR/munged.seed 3>&- 9>&-
  wait_for "munged" 10 sh -c "munge -S $MUNGE_SOCK -n | unmunge -S $MUNGE_SOCK"
}

ensure_user() { # in a chroot (or / for the host)
  chroot "$1" getent passwd $GUID >/dev/null || chroot "$1" useradd -u $GUID -U -m -s /bin/sh $GUSER
}

# --- the namespace holder -------------------------------------------------
NS=
start_ns() {
  local r
  for r in "$@"; do mkdir -p "$r/run/slurm" "$r/run/slurmctld"; done
  local mounts=""
  for r in "$@"; do
    mounts+="mount -t tmpfs -o mode=0755 golden $r/run/slurm; mount -t tmpfs -o mode=0755 golden $r/run/slurmctld; "
  done
  unshare -m --propagation private sh -c "$mounts echo ready > $D/ns.ready; exec sleep 100000" &
  NS=$!
  wait_for "mount namespace $NS" 10 test -e "$D/ns.ready"
}
inns() { nsenter -t "$NS" -m -- "$@"; }

# as_root ROOT CMD... / as_user ROOT CMD...: a client command of ROOT's release
# with a fixed small environment.
as_root() {
  local r=$1
  shift
  inns chroot "$r" env -i PATH=/usr/bin:/bin HOME=/root SLURM_CONF="$CONF" "$@"
}
as_user() {
  local r=$1
  shift
  inns chroot --userspec=$GUID:$GUID "$r" env -i PATH=/usr/bin:/bin HOME=/home/$GUSER USER=$GUSER SLURM_CONF="$CONF" "$@"
}

# daemon NAME ROOT ARGV...: start ARGV in ROOT under strace -o $D/trace-NAME.
PIDS=()
daemon() {
  local name=$1 r=$2
  shift 2
  setsid nsenter -t "$NS" -m -- chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ${SACK_KEY:+SLURM_SACK_KEY=$SACK_KEY} \
    "${ST[@]}" -o "$D/trace-$name" "$@" >"$D/log/$name.out" 2>&1 &
  PIDS+=($!)
  log "started $name (strace pid $!): $*"
}

stop_all() {
  local p c
  for p in "${PIDS[@]}"; do
    for c in $(pgrep -P "$p" 2>/dev/null); do kill "$c" 2>/dev/null || true; done
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill "$p" 2>/dev/null || true
  done
  [ -n "$NS" ] && kill "$NS" 2>/dev/null || true
  NS=
  PIDS=()
}

# --- waits on cluster state -----------------------------------------------
node_state() { as_root "$CTLD_ROOT" sinfo -h -N -n "$1" -o %T 2>/dev/null; }
nodes_idle() { for n in "$@"; do [ "$(node_state "$n")" = idle ] || return 1; done; }
job_state() { as_root "$CTLD_ROOT" scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
job_done() {
  local s
  s=$(job_state "$1")
  case $s in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;; esac
  return 1
}
job_running() { [ "$(job_state "$1")" = RUNNING ]; }
step_running() { as_root "$CTLD_ROOT" scontrol show step "$1" 2>/dev/null | grep -q "State=RUNNING"; }
step_gone() { ! as_root "$CTLD_ROOT" scontrol show step "$1" 2>/dev/null | grep -q "State="; }
task_pids() { # task_pids JOB STEP NODE: the pids of the step's tasks there (scontrol listpids)
  as_root "$CTLD_ROOT" scontrol listpids "$1.$2" "$3" 2>/dev/null | awk -v j="$1" '$2 == j && $4 != "-" {print $1}'
}
tasks_on() { # tasks_on JOB STEP NODE...
  local j=$1 s=$2 n
  shift 2
  for n in "$@"; do [ -n "$(task_pids "$j" "$s" "$n")" ] || return 1; done
}
log_count() { grep -c -- "$1" "$D/log/slurmctld.log" || true; }
log_grew() { [ "$(log_count "$1")" -gt "$2" ]; }
sbatch_id() { sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p'; }
wait_jobs_done() { local j; for j in "$@"; do wait_for "job $j done ($(job_state "$j"))" 240 job_done "$j"; done; }

# --- configuration --------------------------------------------------------
write_conf() { # write_conf AUTH CONFIGLESS EXTRA...
  local auth=$1 configless=$2
  shift 2
  mkdir -p "$D"/{state,log,work-root,work-user,spool-n1,spool-n2}
  chown $GUID:$GUID "$D/work-user"
  cat >"$D/prolog.sh" <<EOF
#!/bin/sh
# Fails while $D/fail-prolog exists (provokes REQUEST_JOB_REQUEUE).
[ -e $D/fail-prolog ] && exit 1
exit 0
EOF
  chmod 0755 "$D/prolog.sh"
  {
    echo "ClusterName=$CLUSTER"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=$PORT"
    # The global SlurmdPort is n1's: scontrol pidinfo asks the slurmd on localhost there.
    echo "SlurmdPort=$((PORT + 1))"
    if [ "$auth" = slurm ]; then
      echo "AuthType=auth/slurm"
      echo "CredType=cred/slurm"
    else
      echo "AuthType=auth/munge"
      echo "CredType=cred/munge"
      echo "AuthInfo=socket=$MUNGE_SOCK"
    fi
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "ProctrackType=${PROCTRACK:-proctrack/pgid}"
    echo "TaskPlugin=${TASKPLUGIN:-task/none}"
    echo "JobAcctGatherType=${JOBACCT:-jobacct_gather/none}"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SwitchType=switch/none"
    echo "MpiDefault=none"
    echo "MailProg=/bin/true"
    echo "SlurmdTimeout=20"
    echo "SlurmctldTimeout=60"
    echo "MessageTimeout=10"
    echo "ReturnToService=2"
    echo "TreeWidth=1"
    echo "KillWait=5"
    echo "InactiveLimit=0"
    echo "MinJobAge=300"
    echo "PrologFlags=Alloc"
    echo "Prolog=$D/prolog.sh"
    echo "Epilog=/bin/true"
    echo "HealthCheckProgram=/bin/true"
    echo "HealthCheckInterval=15"
    echo "AcctGatherNodeFreq=30"
    echo "SrunPortRange=${SRUN_PORTS:-28400-28499}"
    [ "$configless" = yes ] && echo "SlurmctldParameters=enable_configless${CTLD_PARAMS:+,$CTLD_PARAMS}"
    [ "$configless" != yes ] && [ -n "${CTLD_PARAMS:-}" ] && echo "SlurmctldParameters=$CTLD_PARAMS"
    echo "StateSaveLocation=$D/state"
    echo "SlurmdSpoolDir=$D/spool-%n"
    echo "SlurmctldPidFile=$D/slurmctld.pid"
    echo "SlurmdPidFile=$D/slurmd-%n.pid"
    echo "SlurmctldLogFile=$D/log/slurmctld.log"
    echo "SlurmdLogFile=$D/log/slurmd-%n.log"
    echo "SlurmctldDebug=debug2"
    echo "SlurmdDebug=debug2"
    for e in "$@"; do echo "$e"; done
    echo "NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=localhost Port=$((PORT + 1)) CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000${NODE_GRES:+ Gres=$NODE_GRES} State=UNKNOWN"
    echo "NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=localhost Port=$((PORT + 2)) CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"
    echo "PartitionName=golden Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
  # cgroup autodetection fails in the chroots (plain sysfs at /sys/fs/cgroup)
  echo "CgroupPlugin=disabled" >"$D/cgroup.conf"
  if [ "$auth" = slurm ]; then
    dd if=/dev/urandom of="$D/slurm.key" bs=1024 count=1 status=none
    chmod 0600 "$D/slurm.key"
    SACK_KEY=$D/slurm.key
  fi
}

# --- the workload ---------------------------------------------------------
workload() {
  local R=$CTLD_ROOT j
  as_root "$R" env SLURMD_NODENAME=n1 scontrol show slurmd >"$D/log/show-slurmd-n1.txt" 2>&1 || true
  as_root "$R" env SLURMD_NODENAME=n2 scontrol show slurmd >"$D/log/show-slurmd-n2.txt" 2>&1 || true
  log "scontrol reconfigure"
  as_root "$R" scontrol reconfigure
  wait_for "nodes idle after reconfigure" 120 nodes_idle n1 n2

  # job 1: user batch job killed at its 1-minute time limit, on n2
  J_TLIMIT=$(as_user "$R" sbatch -D "$D/work-user" -J tlimit -t 1 --mem=50 -w n2 --wrap 'sleep 300' | sbatch_id)
  # 1-node srun as root (2 tasks, exit 3), 2-node srun as the user (forwarded)
  as_root "$R" srun -D "$D/work-root" -N1 -n2 -w n1 --mem=20 sh -c 'exit 3' || true
  as_user "$R" srun -D "$D/work-user" -N2 -n2 --mem=20 sh -c 'exit $SLURM_PROCID' || true
  # root batch job that exits 3
  j=$(as_root "$R" sbatch -D "$D/work-root" -J exit3 --mem=50 -w n1 --wrap 'exit 3' | sbatch_id)
  wait_jobs_done "$j"
  # user job array 1-2
  j=$(as_user "$R" sbatch -D "$D/work-user" -J arr -a 1-2 --mem=50 -w n1 --wrap 'echo task $SLURM_ARRAY_TASK_ID' | sbatch_id)
  wait_jobs_done "${j}_1" "${j}_2"
  # 2-node user batch job with sbcast and an inner srun
  j=$(as_user "$R" sbatch -D "$D/work-user" -J bcast -N2 -n2 --mem=50 --wrap "sbcast -f $D/prolog.sh $D/work-user/bcast.\$SLURM_JOB_ID; srun -N2 -n2 true" | sbatch_id)
  wait_jobs_done "$j"

  # a 2-node user job with a long step (its tasks and the batch shell ignore
  # SIGUSR1): sstat, sattach, pidinfo, signals, notify, suspend/resume, then
  # its step killed by scancel -s KILL (REQUEST_TERMINATE_TASKS from scancel)
  J_LONG=$(as_user "$R" sbatch -D "$D/work-user" -J long -N2 -n2 --mem=50 \
    --wrap 'trap "" USR1; srun -N2 -n2 sh -c "trap \"\" USR1; sleep 300"; sleep 300' | sbatch_id)
  wait_for "step $J_LONG.0 running" 120 step_running "$J_LONG.0"
  wait_for "tasks of $J_LONG.0 on n1 and n2" 60 tasks_on "$J_LONG" 0 n1 n2
  as_user "$R" sstat -a -j "$J_LONG" >"$D/log/sstat.txt" 2>&1 || true
  as_user "$R" sstat -i -j "$J_LONG.0" >"$D/log/sstat-pids.txt" 2>&1 || true
  cp "$(dirname "$0")/getpids.c" "$D/getpids.c"
  inns chroot "$R" gcc -o "$D/getpids" "$D/getpids.c" -lslurm
  as_user "$R" "$D/getpids" "$J_LONG" 0 "n[1-2]" >"$D/log/getpids.txt" 2>&1 || true
  as_user "$R" timeout -s INT -k 2 10 sattach "$J_LONG.0" </dev/null >"$D/log/sattach.txt" 2>&1 || true
  local pid
  pid=$(task_pids "$J_LONG" 0 n1 | tail -1)
  [ -n "$pid" ] || die "no task pid of $J_LONG.0 on n1"
  as_root "$R" scontrol pidinfo "$pid" >"$D/log/pidinfo.txt" 2>&1 || true
  as_user "$R" scancel -s USR1 "$J_LONG" || true
  as_user "$R" scancel -b -s USR1 "$J_LONG" || true
  as_root "$R" scontrol notify "$J_LONG" hello || true
  as_root "$R" scontrol suspend "$J_LONG" || true
  as_root "$R" scontrol resume "$J_LONG" || true
  as_user "$R" scancel -s KILL "$J_LONG.0" || true
  wait_for "step $J_LONG.0 gone" 60 step_gone "$J_LONG.0"
  as_user "$R" scancel "$J_LONG"
  # a plain scancel of a running batch job
  j=$(as_user "$R" sbatch -D "$D/work-user" -J cancel --mem=50 -w n1 --wrap 'sleep 300' | sbatch_id)
  wait_for "job $j running" 120 job_running "$j"
  as_user "$R" scancel "$j"
  wait_jobs_done "$J_LONG" "$j" "$J_TLIMIT"

  # a Prolog that fails: slurmd asks slurmctld to requeue the job
  touch "$D/fail-prolog"
  j=$(as_user "$R" sbatch -D "$D/work-user" -J badprolog --no-requeue --mem=50 -w n1 --wrap true | sbatch_id)
  wait_jobs_done "$j"
  rm -f "$D/fail-prolog"
  as_root "$R" scontrol update nodename=n1 state=resume || true
  wait_for "n1 idle again" 120 nodes_idle n1 n2
}

# restart slurmctld with a clean state: its first registration request to
# nodes it does not know yet (forwarded n1 -> n2), then a quiet spell for
# pings and health checks; then scontrol shutdown.
restart_and_shutdown() {
  local R=$CTLD_ROOT old pings checks
  old=$(cat "$D/slurmctld.pid")
  kill "$old"
  wait_for "slurmctld $old gone" 60 sh -c "! kill -0 $old"
  daemon ctld2 "$R" /usr/sbin/slurmctld -D -c -i -f "$CONF"
  wait_for "nodes idle after the clean restart" 180 nodes_idle n1 n2
  pings=$(log_count "Spawning ping agent")
  checks=$(log_count "Spawning health check agent")
  wait_for "a ping round after the restart" 120 log_grew "Spawning ping agent" "$pings"
  wait_for "a health check round after the restart" 120 log_grew "Spawning health check agent" "$checks"
  log "scontrol shutdown"
  as_root "$R" scontrol shutdown || true
}

cut_frames() {
  mkdir -p "$D/out"
  (cd "$REPO" && go run ./slurmd-go/pkg/slurmproto/internal/goldencap -out "$D/out" "$D"/trace-*) >"$D/out/index.txt"
  log "$(wc -l <"$D/out/index.txt") frames in $D/out"
  cred_payloads
}

# cred_payloads: the signed bytes of every credential in the frames: munge
# credentials decoded by unmunge -o (they stay decodable while this munged
# runs), JWTs (cred/slurm) by their base64 payload claim.
cred_payloads() {
  # -P: select.py beside it would shadow the select module of a python3
  # that does not build it in
  python3 -P "$REPO/slurmd-go/pkg/slurmproto/testdata/cluster/credpayload.py" --munge-socket $MUNGE_SOCK "$D/out"/*.bin >"$D/out/creds.txt" || true
}

session() { # session REL AUTH PORT
  local rel=$1 auth=$2
  PORT=$3
  D=/tmp/golden-${rel/./}-$auth
  CONF=$D/slurm.conf
  CLUSTER=g${rel/./}${auth:0:1}
  CTLD_ROOT=$CHROOTS/$rel
  local R=$CTLD_ROOT
  [ -d "$R/usr/sbin" ] || die "no chroot $R (scripts/chroots.sh $rel)"
  rm -rf "$D"
  mkdir -p "$D"
  ensure_munged
  ensure_user "$R"
  local configless=no
  SACK_KEY=
  JOBACCT=jobacct_gather/none
  CTLD_PARAMS=
  if [ "$auth" = slurm ]; then
    configless=yes
    JOBACCT=jobacct_gather/linux
  fi
  [ "$rel" = 26.05 ] && CTLD_PARAMS=health_check_report
  write_conf "$auth" $configless
  start_ns "$R"
  trap stop_all EXIT
  daemon n1 "$R" /usr/sbin/slurmd -D -N n1 -f "$CONF"
  if [ $configless = yes ]; then
    daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
    wait_for "slurmctld answering" 60 as_root "$R" scontrol ping
    daemon n2 "$R" /usr/sbin/slurmd -D -N n2 --conf-server "localhost:$PORT"
  else
    daemon n2 "$R" /usr/sbin/slurmd -D -N n2 -f "$CONF"
    daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
  fi
  wait_for "nodes idle" 180 nodes_idle n1 n2
  workload
  restart_and_shutdown
  stop_all
  trap - EXIT
  cut_frames
}

# cross: 26.05 slurmctld and clients, 24.11 stock slurmd nodes (munge).
cross() {
  PORT=$1
  D=/tmp/golden-2605-to-2411
  CONF=$D/slurm.conf
  CLUSTER=gx
  CTLD_ROOT=$CHROOTS/26.05
  local R=$CTLD_ROOT N=$CHROOTS/24.11 j
  rm -rf "$D"
  mkdir -p "$D"
  ensure_munged
  ensure_user "$R"
  ensure_user "$N"
  SACK_KEY=
  JOBACCT=jobacct_gather/none
  CTLD_PARAMS=
  write_conf munge no
  start_ns "$R" "$N"
  trap stop_all EXIT
  daemon n1 "$N" /usr/sbin/slurmd -D -N n1 -f "$CONF"
  daemon n2 "$N" /usr/sbin/slurmd -D -N n2 -f "$CONF"
  daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
  wait_for "nodes idle" 180 nodes_idle n1 n2
  as_root "$R" env SLURMD_NODENAME=n1 scontrol show slurmd >"$D/log/show-slurmd-n1.txt" 2>&1 || true
  as_root "$R" scontrol reconfigure
  wait_for "nodes idle after reconfigure" 120 nodes_idle n1 n2
  as_root "$R" srun -D "$D/work-root" -N1 -n2 -w n1 --mem=20 sh -c 'exit 3' || true
  as_user "$R" srun -D "$D/work-user" -N2 -n2 --mem=20 sh -c 'exit $SLURM_PROCID' || true
  j=$(as_user "$R" sbatch -D "$D/work-user" -J twonode -N2 -n2 --mem=50 --wrap 'srun -N2 -n2 true; exit 3' | sbatch_id)
  wait_jobs_done "$j"
  j=$(as_user "$R" sbatch -D "$D/work-user" -J cancel --mem=50 -w n1 --wrap 'sleep 300' | sbatch_id)
  wait_for "job $j running" 120 job_running "$j"
  as_user "$R" scancel "$j"
  wait_jobs_done "$j"
  restart_and_shutdown
  stop_all
  trap - EXIT
  cut_frames
}

# daemon_host NAME ARGV...: a host (22.05) daemon under strace.
daemon_host() {
  local name=$1
  shift
  setsid env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${ST[@]}" -o "$D/trace-$name" "$@" >"$D/log/$name.out" 2>&1 &
  PIDS+=($!)
  log "started $name on the host (strace pid $!): $*"
}

file_has() { grep -q -- "$2" "$1" 2>/dev/null; }

# old_slurmd_to REL PORT: the host's 22.05 slurmd registering with REL's
# slurmctld; kept until slurmctld has probed it and it has retried.
old_slurmd_to() {
  local rel=$1 R=$CHROOTS/$1
  PORT=$2
  D=$NEG/ctld${rel/./}-vs-2205
  CONF=$D/slurm.conf
  CLUSTER=gn${rel/./}
  CTLD_ROOT=$R
  mkdir -p "$D"
  SACK_KEY= JOBACCT=jobacct_gather/none CTLD_PARAMS=
  write_conf munge no
  # the 22.05 slurmd reads its own copy: no cgroup.conf (22.05 has no
  # CgroupPlugin=disabled; it autodetects the host's cgroup)
  mkdir -p "$D/node2205"
  cp "$CONF" "$D/node2205/slurm.conf"
  PIDS=()
  start_ns "$R"
  trap stop_all EXIT
  daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
  wait_for "slurmctld $rel answering" 60 as_root "$R" scontrol ping
  daemon_host n1 /usr/sbin/slurmd -D -N n1 -f "$D/node2205/slurm.conf"
  wait_for "22.05 slurmd failing to register" 120 file_has "$D/log/slurmd-n1.log" "Unable to register"
  wait_for "slurmctld $rel probing n1" 120 file_has "$D/log/slurmctld.log" "REQUEST_NODE_REGISTRATION_STATUS"
  wait_for "slurmctld $rel giving up on n1" 180 file_has "$D/log/slurmctld.log" "not responding"
  stop_all
  trap - EXIT
  mkdir -p "$D/out"
  (cd "$REPO" && go run ./slurmd-go/pkg/slurmproto/internal/goldencap -out "$D/out" "$D"/trace-*) >"$D/out/index.txt"
  # the 22.05 slurmd's view of each reply, frame or not: what it read on
  # each connection to slurmctld's port
  python3 "$(dirname "$0")/rawstreams.py" "$PORT" "$D"/trace-n1.* >"$D/out/n1-recv-from-ctld.txt"
}

# negotiation PORT: what each controller answers to a registration in a
# version it does not accept (see ../README.md, negotiation/).
negotiation() {
  local base=$1 r
  NEG=/tmp/golden-negotiation
  rm -rf "$NEG"
  mkdir -p "$NEG"
  ensure_munged
  old_slurmd_to 24.11 "$base"
  old_slurmd_to 26.05 $((base + 10))
  # probes: freshly signed copies of real registrations, re-versioned
  local f2600 f2a00 f2d00
  f2600=$(ls "$NEG"/ctld2411-vs-2205/out/n1-send-MESSAGE_NODE_REGISTRATION_STATUS-v2600-1.bin)
  f2a00=/tmp/golden-2411-munge/out/ctld-recv-MESSAGE_NODE_REGISTRATION_STATUS-v2a00-1.bin
  f2d00=/tmp/golden-2605-munge/out/ctld-recv-MESSAGE_NODE_REGISTRATION_STATUS-v2d00-1.bin
  [ -s "$f2a00" ] && [ -s "$f2d00" ] || die "run the 24.11 and 26.05 munge sessions first"
  D=$NEG/probes
  mkdir -p "$D"
  local rel port
  PIDS=()
  for rel in 22.05 24.11 26.05; do
    case $rel in 22.05) port=$((base + 20)) ;; 24.11) port=$((base + 30)) ;; 26.05) port=$((base + 40)) ;; esac
    D=$NEG/probes/ctld${rel/./}
    PORT=$port CONF=$D/slurm.conf CLUSTER=gp${rel/./}
    mkdir -p "$D"
    SACK_KEY= JOBACCT=jobacct_gather/none CTLD_PARAMS=
    write_conf munge no
    if [ $rel = 22.05 ]; then
      rm -f "$D/cgroup.conf"
      daemon_host ctld /usr/sbin/slurmctld -D -i -f "$CONF"
      wait_for "slurmctld 22.05 answering" 60 env SLURM_CONF="$CONF" scontrol ping
    else
      [ -n "$NS" ] || start_ns "$CHROOTS/24.11" "$CHROOTS/26.05"
      CTLD_ROOT=$CHROOTS/$rel
      daemon ctld "$CTLD_ROOT" /usr/sbin/slurmctld -D -i -f "$CONF"
      wait_for "slurmctld $rel answering" 60 as_root "$CTLD_ROOT" scontrol ping
    fi
    trap stop_all EXIT
    for v in 2600 2a00 2d00; do
      eval "f=\$f$v"
      python3 "$(dirname "$0")/probe.py" --munge-socket $MUNGE_SOCK --version 0x$v --frame "$f" \
        --out-request "$NEG/probes/reg_status_v$v.bin" --out-reply "$NEG/probes/ctld${rel/./}_reply_to_v$v" \
        127.0.0.1 "$port" | tee -a "$NEG/probes/results.txt"
    done
  done
  stop_all
  trap - EXIT
}

# bcast2205 PORT: REQUEST_FILE_BCAST from 22.05.8 (see ../README.md, sbcast/):
# the host's slurmctld and two stock slurmd, and a user batch job that runs
# sbcast for its step 1, so that the credential's step id is not its het job
# id (0). The munged is stopped afterwards if this run started it.
bcast2205() {
  PORT=$1
  D=/tmp/golden-2205-bcast
  CONF=$D/slurm.conf
  CLUSTER=g2205b
  CTLD_ROOT=/
  local j had_munged=no
  rm -rf "$D"
  mkdir -p "$D"
  [ -S $MUNGE_SOCK ] && munge -S $MUNGE_SOCK -n 2>/dev/null | unmunge -S $MUNGE_SOCK >/dev/null 2>&1 && had_munged=yes
  ensure_munged
  ensure_user /
  SACK_KEY= JOBACCT=jobacct_gather/none CTLD_PARAMS=
  write_conf munge no
  # 22.05 has no CgroupPlugin=disabled; it autodetects the host's cgroup
  rm -f "$D/cgroup.conf"
  printf 'tiee sbcast golden file (22.05.8)\n' >"$D/bcast-src.txt"
  PIDS=()
  start_ns # no chroot: the host's clients, in a namespace like the others
  trap stop_all EXIT
  daemon_host n1 /usr/sbin/slurmd -D -N n1 -f "$CONF"
  daemon_host n2 /usr/sbin/slurmd -D -N n2 -f "$CONF"
  daemon_host ctld /usr/sbin/slurmctld -D -i -f "$CONF"
  wait_for "nodes idle" 180 nodes_idle n1 n2
  j=$(as_user / sbatch -D "$D/work-user" -J bcast -N2 -n2 --mem=50 -t 2 --wrap "
running() { scontrol show step \$SLURM_JOB_ID.\$1 2>/dev/null | grep -q State=RUNNING; }
srun -N2 -n2 sleep 100 & a=\$!
until running 0; do sleep 0.2; done
srun -N2 -n2 --overlap sleep 100 & b=\$!
until running 1; do sleep 0.2; done
sbcast -j \$SLURM_JOB_ID.1 -f $D/bcast-src.txt $D/work-user/bcast.\$SLURM_JOB_ID
kill \$a \$b; wait" | sbatch_id)
  [ -n "$j" ] || die "sbatch gave no job id"
  wait_jobs_done "$j"
  log "job $j: $(job_state "$j"); $(ls -l "$D/work-user/bcast.$j" 2>&1)"
  stop_all
  trap - EXIT
  cut_frames
  if [ $had_munged = no ]; then
    kill "$(cat $MUNGE_DIR/munged.pid)"
    log "stopped the munged this run started"
  fi
}

# callerid REL PORT: REQUEST_NETWORK_CALLERID from REL's scontrol and n1's
# answers, for a connection a batch job's process holds (found) and for a
# made-up one (NO_VAL). munge; slurmctld and n1 only.
callerid() {
  local rel=$1
  PORT=$2
  D=/tmp/golden-callerid-${rel/./}
  CONF=$D/slurm.conf
  CLUSTER=gcid${rel/./}
  CTLD_ROOT=$CHROOTS/$rel
  [ "$rel" = 22.05 ] && CTLD_ROOT=/
  local R=$CTLD_ROOT
  [ -d "$R/usr/sbin" ] || die "no root $R for $rel"
  rm -rf "$D"
  mkdir -p "$D"
  ensure_munged
  SACK_KEY=
  JOBACCT=jobacct_gather/none
  CTLD_PARAMS=
  write_conf munge no
  # 22.05 has no CgroupPlugin=disabled; the host's cgroups work for it
  [ "$rel" = 22.05 ] && rm -f "$D/cgroup.conf"
  start_ns "$R"
  trap stop_all EXIT
  daemon n1 "$R" /usr/sbin/slurmd -D -N n1 -f "$CONF"
  daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
  wait_for "n1 idle" 180 nodes_idle n1
  # The job's process connects to its own listener and writes both ports.
  local job
  job=$(as_root "$R" sbatch -w n1 -D "$D/work-root" -o /dev/null --wrap "python3 -c 'import socket,time
l=socket.socket(); l.bind((\"127.0.0.1\",0)); l.listen(1)
c=socket.create_connection(l.getsockname()); a,_=l.accept()
open(\"conn.tmp\",\"w\").write(\"%d %d\" % (c.getsockname()[1], l.getsockname()[1]))
import os; os.rename(\"conn.tmp\",\"conn\"); time.sleep(120)'" | sbatch_id)
  wait_for "job $job's connection" 60 test -s "$D/work-root/conn"
  local cport lport
  read -r cport lport <"$D/work-root/conn" || true # no newline at its end
  as_root "$R" scontrol callerid 127.0.0.1 "$cport" 127.0.0.1 "$lport" >"$D/found.txt" 2>&1 || true
  as_root "$R" scontrol callerid 127.0.0.1 1 127.0.0.1 2 >"$D/none.txt" 2>&1 || true
  log "found: $(cat "$D/found.txt"); none: $(cat "$D/none.txt")"
  as_root "$R" scancel "$job" || true
  as_root "$R" scontrol shutdown || true
  stop_all
  trap - EXIT
  cut_frames
}

# stepmgr REL AUTH PORT: REQUEST_LAUNCH_PROLOG with the stepmgr job buffers that
# slurmctld sends the first node of a job when SlurmctldParameters=enable_stepmgr
# hands that node's extern step the job's step management (24.11, 26.05).
stepmgr() {
  local rel=$1 auth=$2
  PORT=$3
  D=/tmp/golden-stepmgr-${rel/./}-$auth
  CONF=$D/slurm.conf
  CLUSTER=gsm${rel/./}${auth:0:1}
  CTLD_ROOT=$CHROOTS/$rel
  local R=$CTLD_ROOT
  [ -d "$R/usr/sbin" ] || die "no chroot $R (scripts/chroots.sh $rel)"
  rm -rf "$D"
  mkdir -p "$D"
  ensure_munged
  SACK_KEY=
  JOBACCT=jobacct_gather/none
  CTLD_PARAMS=enable_stepmgr
  write_conf "$auth" no "PrologFlags=Contain"
  start_ns "$R"
  trap stop_all EXIT
  daemon n1 "$R" /usr/sbin/slurmd -D -N n1 -f "$CONF"
  daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
  wait_for "n1 idle" 180 nodes_idle n1
  local job
  job=$(as_root "$R" sbatch -w n1 -D "$D/work-root" -o /dev/null --wrap "srun true" | sbatch_id)
  wait_jobs_done "$job"
  as_root "$R" scontrol shutdown || true
  stop_all
  trap - EXIT
  cut_frames
}

# gres REL PORT CGROUP: GRES credentials and what stock slurmstepd makes of
# them. n1 alone, gres.conf with 4 GPUs whose device files are char devices
# of the mem driver (1:7 full, 1:8 random, 1:9 urandom, 5:2 ptmx: opening
# them works, so a denied open is the device cgroup's EPERM) and 8 shards
# over them. Each job writes its environment and, per device file, whether
# it opened into $D/work-*/NAME.<task>.
gres() {
  local rel=$1 cg=$3
  PORT=$2
  D=/tmp/golden-gres-${rel/./}-$cg
  CONF=$D/slurm.conf
  CLUSTER=ggres${rel/./}
  CTLD_ROOT=$CHROOTS/$rel
  [ "$rel" = 22.05 ] && CTLD_ROOT=/
  local R=$CTLD_ROOT
  [ -d "$R/usr/sbin" ] || die "no root $R for $rel"
  rm -rf "$D"
  mkdir -p "$D/dev"
  ensure_munged
  ensure_user "$R"
  SACK_KEY= JOBACCT=jobacct_gather/none CTLD_PARAMS=
  local devs=(1:7 1:8 1:9 5:2) i
  for i in 0 1 2 3; do
    mknod -m 0666 "$D/dev/gpu$i" c "${devs[$i]%:*}" "${devs[$i]#*:}"
  done
  NODE_GRES=gpu:4,shard:8
  if [ "$cg" = yes ]; then
    PROCTRACK=proctrack/cgroup TASKPLUGIN=task/cgroup write_conf munge no "GresTypes=gpu,shard" "DebugFlags=Gres"
    printf 'CgroupPlugin=cgroup/v1\nConstrainDevices=yes\n' >"$D/cgroup.conf"
  else
    write_conf munge no "GresTypes=gpu,shard" "DebugFlags=Gres"
    [ "$rel" = 22.05 ] && rm -f "$D/cgroup.conf"
  fi
  NODE_GRES=
  printf 'Name=gpu File=%s/dev/gpu[0-3]\nName=shard Count=8 File=%s/dev/gpu[0-3]\n' "$D" "$D" >"$D/gres.conf"
  PIDS=()
  local probe="env | sort > \$W/\$N.\${SLURM_PROCID:-b}.env; for f in $D/dev/gpu*; do if true < \$f 2>/dev/null; then echo \$f ok; else echo \$f denied; fi; done > \$W/\$N.\${SLURM_PROCID:-b}.dev"
  printf '#!/bin/sh\n%s\n' "$probe" >"$D/probe.sh"
  chmod 0755 "$D/probe.sh"
  if [ "$rel" = 22.05 ]; then
    start_ns
    trap stop_all EXIT
    daemon_host n1 /usr/sbin/slurmd -D -N n1 -f "$CONF"
    daemon_host ctld /usr/sbin/slurmctld -D -i -f "$CONF"
  else
    start_ns "$R"
    trap stop_all EXIT
    daemon n1 "$R" /usr/sbin/slurmd -D -N n1 -f "$CONF"
    daemon ctld "$R" /usr/sbin/slurmctld -D -i -f "$CONF"
  fi
  wait_for "n1 idle" 180 nodes_idle n1
  as_root "$R" scontrol show node n1 >"$D/node.txt" 2>&1 || true
  local W=$D/work-user j
  # job 1: the batch step of --gres=gpu:2, and a step inside it that takes the job's GPUs
  j=$(as_user "$R" sbatch -w n1 -D "$W" -o /dev/null --gres=gpu:2 --wrap "W=$W N=batch $D/probe.sh; W=$W N=inner srun -n1 $D/probe.sh" | sbatch_id)
  wait_jobs_done "$j"
  # job 2: srun --gpus-per-task=1 -n2
  as_user "$R" env W="$W" N=pertask srun -w n1 -D "$W" -n2 --gpus-per-task=1 "$D/probe.sh" || log "job 2 failed"
  # job 3: a shard step
  as_user "$R" env W="$W" N=shard srun -w n1 -D "$W" -n1 --gres=shard:2 "$D/probe.sh" || log "job 3 failed"
  # job 4: --gres=gpu:3 with --gpu-bind=map_gpu:2,0 over two tasks
  as_user "$R" env W="$W" N=mapgpu srun -w n1 -D "$W" -n2 --gres=gpu:3 --gpu-bind=map_gpu:2,0 "$D/probe.sh" || log "job 4 failed"
  as_root "$R" scontrol shutdown || true
  stop_all
  trap - EXIT
  cut_frames
  gres_select
}

# gres_select: $D/golden = what testdata/gres/<rel>-<cg|nocg>/ holds: the
# launches n1 received in job order (batch launch, inner srun, per-task,
# shard, map_gpu) with their credentials' signed bytes, gres.conf,
# scontrol show node, and under stock/ each task's GRES variables and device
# opens.
gres_select() {
  local G=$D/golden f i name
  rm -rf "$G"
  mkdir -p "$G/stock"
  f=$(ls "$D"/out/ctld-send-REQUEST_BATCH_JOB_LAUNCH-v*-1.bin)
  name=batch_job_launch_$(sed 's/.*-v\([0-9a-f]*\)-1.bin/v\1/' <<<"$f")
  cp "$f" "$G/$name.bin"
  [ -e "${f%.bin}.cred-payload.bin" ] && cp "${f%.bin}.cred-payload.bin" "$G/batch_job_launch_cred_payload.bin"
  # The inner srun runs on n1 under its slurmstepd: goldencap sees that
  # launch as n1's send (both ends are n1's process tree), the other three
  # as n1's receives.
  local recvs srcs
  recvs=$(ls "$D"/out/n1-recv-REQUEST_LAUNCH_TASKS-v*-[0-9].bin | wc -l)
  if [ "$recvs" -ge 4 ]; then
    srcs=(n1-recv:1 n1-recv:2 n1-recv:3 n1-recv:4)
  else
    srcs=(n1-send:1 n1-recv:1 n1-recv:2 n1-recv:3)
  fi
  i=0
  for name in inner pertask shard mapgpu; do
    f=$(ls "$D"/out/"${srcs[$i]%:*}"-REQUEST_LAUNCH_TASKS-v*-"${srcs[$i]#*:}".bin)
    cp "$f" "$G/launch_tasks_${name}_$(sed 's/.*-v\([0-9a-f]*\)-[0-9]*.bin/v\1/' <<<"$f").bin"
    [ -e "${f%.bin}.cred-payload.bin" ] && cp "${f%.bin}.cred-payload.bin" "$G/launch_tasks_${name}_cred_payload.bin"
    i=$((i + 1))
  done
  cp "$D/gres.conf" "$D/node.txt" "$G/"
  for f in "$D"/work-user/*.env; do
    name=$(basename "$f" .env)
    name=${name/.b/.0}
    grep -E '^(CUDA_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|ZE_AFFINITY_MASK|GPU_DEVICE_ORDINAL|SLURM_JOB_GPUS|SLURM_STEP_GPUS|SLURM_GPUS_ON_NODE|SLURM_SHARDS_ON_NODE)=' "$f" | sort >"$G/stock/$name.env" || true
    cp "${f%.env}.dev" "$G/stock/$name.dev"
  done
  ls -l "$G" "$G/stock" >&2
}

# The whole command line is parsed before it runs: editing this file while a
# capture runs cannot make bash read on at a shifted offset.
main() {
  case ${1:-} in
  session) session "$2" "$3" "$4" ;;
  cross) cross "$2" ;;
  negotiation) negotiation "$2" ;;
  callerid) callerid "$2" "$3" ;;
  stepmgr) stepmgr "$2" "$3" "$4" ;;
  gres) gres "$2" "$3" "$4" ;;
  gres-select) D=$2 gres_select ;;
  bcast2205) SRUN_PORTS=${SRUN_PORTS:-$(($2 + 30))-$(($2 + 79))} bcast2205 "$2" ;;
  recut) # recut DIR: cut a session's traces again (goldencap changed)
    D=$2
    rm -rf "$D/out"
    cut_frames
    ;;
  *)
    sed -n '2,20p' "$0"
    exit 2
    ;;
  esac
}
main "$@"; exit $?
