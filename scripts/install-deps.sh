#!/usr/bin/env bash
# Installs the Debian 12 packages the project builds and tests against. Idempotent.
set -euo pipefail
# libpam-slurm-adopt and pamtester: the extern step's pam_slurm_adopt test (python3 drives libpam).
# libpmix-dev and pkg-config build bin/slurmd-go-pmix (srun --mpi=pmix); mpich, openmpi and mpi4py
# are the MPI programs the pmi2/pmix tests build and run. prometheus: the real Prometheus that
# TestMetrics runs against the daemon's --metrics-addr. nftables: the harness's BlockZones
# (TestCluster_Zones), whose SetZoneLatency uses iptables' NFQUEUE.
pkgs=(slurmctld slurmd slurm-client munge libmunge-dev libslurm-dev gcc make pkg-config iproute2 procps expect tmux strace python3 libpam-slurm-adopt pamtester
  libpmix-dev mpich libmpich-dev openmpi-bin libopenmpi-dev python3-mpi4py prometheus
  etcd-server containerd runc containernetworking-plugins iptables nftables busybox-static curl openssl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The packaged services must not run: tests start their own daemons with their own configs.
for s in slurmctld slurmd prometheus; do
  if command -v systemctl >/dev/null && systemctl is-active -q "$s" 2>/dev/null; then systemctl stop "$s" || true; fi
done
