#!/usr/bin/env bash
# make demo: a local Slurm cluster of slurmd-go nodes under Debian's real
# slurmctld, on loopback. `scripts/demo.sh stop` (make demo-stop) ends it.
#
#   SLURM=22.05 (default) the host's Slurm; 24.11 or 26.05: slurmctld, the clients and
#               the nodes (so their jobs' srun) run in that release's chroot
#               (scripts/chroots.sh), and the same bin/slurmd-go speaks that release
#   AUTH=munge  (default) or slurm: auth/slurm and cred/slurm with a fresh slurm.key
#               next to slurm.conf and no munged; clients get their tokens from the
#               SACK socket the node daemons serve (24.11 and 26.05 only)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${TIEE_DEMO_DIR:-/tmp/tiee-demo}
nodes=${TIEE_DEMO_NODES:-4}
ctld_port=${TIEE_DEMO_PORT:-16817}
release=${SLURM:-22.05}
authtype=${AUTH:-munge}
export SLURM_CONF=$dir/slurm.conf

stop() {
  for p in "$dir"/*.pid; do
    [ -f "$p" ] || continue
    pid=$(cat "$p" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  sleep 1
  echo "demo cluster stopped"
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi

[ "$(id -u)" = 0 ] || { echo "make demo runs as root (it starts slurmctld and node daemons)" >&2; exit 1; }
[ -x "$root/bin/slurmd-go" ] || { echo "bin/slurmd-go missing: run make build" >&2; exit 1; }
case "$release/$authtype" in
22.05/munge | 24.11/munge | 24.11/slurm | 26.05/munge | 26.05/slurm) ;;
*) echo "make demo: SLURM=$release AUTH=$authtype: want SLURM=22.05|24.11|26.05, AUTH=munge|slurm (auth/slurm from 24.11)" >&2; exit 2 ;;
esac
# R runs a Slurm program of the release: on the host for 22.05, else in its chroot
# (which shares /tmp, /run/munge and this repository with the host).
chroot_dir=""
if [ "$release" != 22.05 ]; then
  chroot_dir=$("$root/scripts/chroots.sh" "$release" | tail -1)
fi
R() {
  if [ -n "$chroot_dir" ]; then chroot "$chroot_dir" env --chdir="$PWD" "$@"; else "$@"; fi
}
stop >/dev/null 2>&1 || true
rm -rf "$dir"; mkdir -p "$dir/state"
if [ "$authtype" = munge ]; then
  "$root/scripts/ensure-munged.sh"
else
  # auth/slurm refuses a key others may read.
  (umask 077; head -c 1024 /dev/urandom >"$dir/slurm.key")
fi

# The nodes describe this machine, as `slurmd-go -C` (same output as `slurmd -C`) sees it.
hw=$("$root/bin/slurmd-go" -C | head -1 | cut -d' ' -f2-)
{
  echo "ClusterName=tieedemo"
  echo "SlurmctldHost=localhost(127.0.0.1)"
  echo "SlurmctldPort=$ctld_port"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/$authtype"
  echo "CredType=cred/$authtype"
  echo "StateSaveLocation=$dir/state"
  echo "SlurmdSpoolDir=$dir/spool/%n"
  echo "SlurmdPidFile=$dir/%n.pid"
  echo "SlurmdLogFile=$dir/%n.log"
  echo "SlurmctldPidFile=$dir/slurmctld.pid"
  echo "SlurmctldLogFile=$dir/slurmctld.log"
  echo "SelectType=select/cons_tres"
  echo "ProctrackType=proctrack/pgid"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "MpiDefault=none"
  echo "MailProg=/bin/true"
  echo "ReturnToService=2"
  echo "SlurmdTimeout=30"
  echo "TreeWidth=2"
  for i in $(seq 1 "$nodes"); do
    echo "NodeName=demo$i NodeAddr=127.0.0.1 NodeHostname=localhost Port=$((ctld_port + i)) $hw State=UNKNOWN"
  done
  echo "PartitionName=demo Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$SLURM_CONF"

R /usr/sbin/slurmctld -f "$SLURM_CONF"
for _ in $(seq 1 50); do R scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
for i in $(seq 1 "$nodes"); do
  R "$root/bin/slurmd-go" -N "demo$i" -f "$SLURM_CONF"
done

echo "waiting for the slurmd-go nodes to register..."
for _ in $(seq 1 60); do
  idle=$(R sinfo -h -N -o '%T' | grep -c '^idle$' || true)
  [ "$idle" -ge "$nodes" ] && break
  sleep 1
done
echo
echo "Slurm $release ($(R sinfo --version)), auth/$authtype"
echo "\$ SLURM_CONF=$SLURM_CONF sinfo -N -l"
R sinfo -N -l
echo
echo "\$ scontrol show node demo1"
R scontrol show node demo1
echo
echo "Jobs through the cluster: a batch job and a 4-task array, as root and as an ordinary user."
id tieedemo >/dev/null 2>&1 || useradd -M -s /bin/bash tieedemo
if [ -n "$chroot_dir" ] && ! R id tieedemo >/dev/null 2>&1; then
  R groupadd -g "$(id -g tieedemo)" tieedemo 2>/dev/null || true
  R useradd -M -s /bin/bash -u "$(id -u tieedemo)" -g "$(id -g tieedemo)" tieedemo
fi
work=$dir/work; mkdir -p "$work"; chmod 1777 "$work"
cd "$work"
j1=$(R sbatch --parsable -o "$work/hello-%j.out" --wrap 'echo "hello from $SLURMD_NODENAME, job $SLURM_JOB_ID, user $(id -un)"; exit 3')
j2=$(R runuser -u tieedemo -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable -a 1-4 -o "$work/array-%A_%a.out" --wrap 'echo "array task $SLURM_ARRAY_TASK_ID on $SLURMD_NODENAME as $(id -un)"')
for _ in $(seq 1 60); do
  [ -z "$(R squeue -h -j "$j1,$j2" 2>/dev/null)" ] && break
  sleep 1
done
echo
echo "\$ scontrol show job $j1 | grep -E 'JobState|ExitCode'"
R scontrol show job "$j1" | grep -E 'JobState|ExitCode'
echo "\$ cat $work/hello-$j1.out"
cat "$work/hello-$j1.out"
echo "\$ cat $work/array-${j2}_*.out"
cat "$work"/array-"${j2}"_*.out
echo
echo "srun steps: labelled output from 4 nodes, stdin, and an exit code, as the ordinary user"
echo "\$ srun -N4 -n8 --label sh -c 'echo task \$SLURM_PROCID on \$SLURMD_NODENAME'"
R runuser -u tieedemo -- env SLURM_CONF="$SLURM_CONF" timeout 60 srun -N4 -n8 --label sh -c 'echo task $SLURM_PROCID on $SLURMD_NODENAME' | sort -n
echo "\$ echo 'piped through srun' | srun -n1 tr a-z A-Z"
echo 'piped through srun' | R runuser -u tieedemo -- env SLURM_CONF="$SLURM_CONF" timeout 60 srun -n1 tr a-z A-Z
echo "\$ srun -n1 sh -c 'exit 3'; echo \$?"
rc=0; R runuser -u tieedemo -- env SLURM_CONF="$SLURM_CONF" timeout 60 srun -n1 sh -c 'exit 3' 2>&1 || rc=$?
echo "$rc"
echo
echo "The node daemons are slurmd-go:"
for i in $(seq 1 "$nodes"); do
  pid=$(cat "$dir/demo$i.pid"); echo "  demo$i: pid $pid $(readlink /proc/$pid/exe)"
done
echo
echo "The cluster keeps running: export SLURM_CONF=$SLURM_CONF to use it; make demo-stop ends it."
