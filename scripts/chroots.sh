#!/usr/bin/env bash
# Builds (once) and mounts the Debian chroots that hold the newer Slurm releases the
# real-cluster tests run against: trixie (Slurm 24.11) and sid (Slurm 26.05). Debian 12,
# the host, is 22.05 and needs no chroot. Idempotent; prints each chroot's root.
#
#   scripts/chroots.sh 24.11 26.05        build if missing, mount, print the roots
#   scripts/chroots.sh --umount 24.11     undo the mounts
#
# TIEE_CHROOT_DIR (default /var/lib/tiee/chroots) holds them, one directory per release.
# TIEE_CHROOT_BIND: extra host directories bind-mounted at the same path inside
# (default: this repository, so bin/slurmd-go runs inside under its own path).
set -euo pipefail

base=${TIEE_CHROOT_DIR:-/var/lib/tiee/chroots}
mirror=${TIEE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
repo=$(cd "$(dirname "$0")/.." && pwd)
binds=${TIEE_CHROOT_BIND:-$repo}
# mpich, openmpi-bin (with its libpmix, which bin/slurmd-go-pmix loads inside the chroot),
# libopenmpi-dev and python3-mpi4py: the MPI tests build and run their programs there.
pkgs=(slurmctld slurmd slurm-client munge libslurm-dev iproute2 procps util-linux strace expect python3 gcc libc6-dev libpam-slurm-adopt pamtester
  mpich libmpich-dev openmpi-bin libopenmpi-dev python3-mpi4py)

suite_of() {
  case "$1" in
    24.11) echo trixie ;;
    26.05) echo sid ;;
    *) echo "chroots.sh: no chroot for Slurm release '$1' (24.11 or 26.05; 22.05 is the host)" >&2; return 1 ;;
  esac
}

mounted() { awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

bind() { # bind SRC DST [rbind]
  mkdir -p "$2"
  if mounted "$2"; then
    # Still SRC? A repository removed and cloned again at the same path
    # leaves a mount of the deleted directory: mount the new one over it.
    [ "$(stat -c %d:%i "$1")" = "$(stat -c %d:%i "$2")" ] && return 0
    umount -l "$2"
  fi
  mount "--${3:-bind}" "$1" "$2"
}

build() {
  local rel=$1 root=$2 suite tmp
  suite=$(suite_of "$rel")
  tmp="$root.tmp"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$root")"
  echo "chroots.sh: debootstrap $suite -> $root" >&2
  debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1 || {
    tail -20 "$tmp.log" >&2
    return 1
  }
  # The archive copy reachable here can be frozen: sid's Release file is past Valid-Until.
  echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99no-check-valid-until"
  # Package scripts must not start services: the tests start their own daemons.
  printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
  chmod 0755 "$tmp/usr/sbin/policy-rc.d"
  cp /etc/hosts "$tmp/etc/hosts"
  cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
  chroot "$tmp" apt-get update -qq >>"$tmp.log" 2>&1 || chroot "$tmp" apt-get update -qq >>"$tmp.log" 2>&1
  DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$tmp.log" 2>&1 || {
    tail -20 "$tmp.log" >&2
    return 1
  }
  chroot "$tmp" dpkg-query -W slurmd munge >"$tmp/.tiee-ready"
  rm -f "$tmp.log"
  mv "$tmp" "$root"
}

# add_missing ROOT: a chroot built before a package joined pkgs gets it (idempotent).
add_missing() {
  local root=$1 p missing=()
  for p in "${pkgs[@]}"; do
    chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "chroots.sh: installing ${missing[*]} in $root" >&2
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$root.add.log" 2>&1 || {
    chroot "$root" apt-get update -qq >>"$root.add.log" 2>&1
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$root.add.log" 2>&1
  } || { tail -20 "$root.add.log" >&2; return 1; }
  rm -f "$root.add.log"
}

mount_all() {
  local root=$1 d
  bind /proc "$root/proc"
  bind /sys "$root/sys" rbind # cgroup hierarchies included
  bind /dev "$root/dev" rbind # /dev/pts and /dev/shm included
  bind /tmp "$root/tmp"
  mkdir -p /run/munge
  bind /run/munge "$root/run/munge"
  for d in $binds; do
    [ -d "$d" ] && bind "$d" "$root$d"
  done
}

umount_all() {
  local root=$1 m
  # Deepest first.
  awk -v r="$root/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}

if [ "$(id -u)" != 0 ]; then
  echo "chroots.sh: must run as root" >&2
  exit 1
fi
action=up
if [ "${1:-}" = --umount ]; then
  action=down
  shift
fi
[ $# -gt 0 ] || { echo "usage: chroots.sh [--umount] RELEASE..." >&2; exit 2; }
up() { # up RELEASE: build if missing, mount
  local rel=$1 root="$base/$1"
  # One builder at a time per release (CI and helpers may call this concurrently).
  mkdir -p "$(dirname "$base")"
  exec 9>"$base.$rel.lock"
  flock 9
  [ -f "$root/.tiee-ready" ] || build "$rel" "$root"
  add_missing "$root"
  mount_all "$root"
  flock -u 9
}

for rel in "$@"; do
  suite_of "$rel" >/dev/null
done
if [ $action = down ]; then
  for rel in "$@"; do
    umount_all "$base/$rel"
  done
  exit 0
fi
# debootstrap once, before the builders run in parallel (two apt-gets would race for
# dpkg's lock).
for rel in "$@"; do
  if [ ! -f "$base/$rel/.tiee-ready" ] && ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
done
# The releases build at once (each ~1.5 min the first time, mostly download and
# dpkg waiting on I/O); the roots are printed in argument order once all are up.
pids=()
for rel in "$@"; do
  up "$rel" &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "chroots.sh: release ${*:$((i + 1)):1} failed" >&2; rc=1; }
done
[ $rc -eq 0 ] || exit $rc
for rel in "$@"; do
  echo "$base/$rel"
done
