#!/usr/bin/env bash
# Captures what stock `slurmd -G` of each release prints for every case
# here (node.conf: the GresTypes and NodeName lines of slurm.conf; gres.conf
# and any *.conf it includes; node: the -N name, default t1) into
# <case>/stock-<release>.txt, log prefixes and timestamps stripped.
# Device files: /tmp/tiee-gres-dev/nv0..nv9, char 195:N (made here). Run as
# root; 24.11 and 26.05 run in the chroots of scripts/chroots.sh.
#
#   slurmd-go/pkg/gres/testdata/stock/capture.sh [CASE...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CHROOTS=${TIEE_CHROOT_DIR:-/var/lib/tiee/chroots}
DEV=/tmp/tiee-gres-dev
RUN=/tmp/tiee-gres-run
mkdir -p $DEV
for i in 0 1 2 3 4 5 6 7 8 9; do [ -c $DEV/nv$i ] || { rm -f $DEV/nv$i; mknod $DEV/nv$i c 195 $i; }; done
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=($(cd "$HERE" && ls -d */ | tr -d /))
for c in "${cases[@]}"; do
  node=t1
  [ -f "$HERE/$c/node" ] && node=$(cat "$HERE/$c/node")
  for rel in 22.05 24.11 26.05; do
    d=$RUN/$rel/$c
    rm -rf "$d"; mkdir -p "$d/spool"
    cp "$HERE/$c"/*.conf "$d/"
    "$HERE/../slurm.conf.sh" "$d" > "$d/slurm.conf"
    cmd=(timeout 90 slurmd -G -N "$node" -f "$d/slurm.conf")
    [ $rel = 22.05 ] || cmd=(chroot "$CHROOTS/$rel" env --chdir="$d" "${cmd[@]}")
    "${cmd[@]}" > "$d/out" 2>&1 || true
    # The run directory reads <dir>; lines about this host's cgroups and
    # hwloc are not about GRES.
    sed -E -e 's/^\[[0-9T:.-]+\] //' -e 's/^slurmd(-[a-z0-9]+)?: //' -e "s|$d|<dir>|g" "$d/out" |
      grep -v -e '_read_slurm_cgroup_conf' -e 'cgroup/v1 plugin is deprecated' \
        -e 'xcpuinfo_hwloc_topo_load' > "$HERE/$c/stock-$rel.txt" || true
  done
  echo "$c: $(wc -l < "$HERE/$c/stock-22.05.txt") lines"
done
