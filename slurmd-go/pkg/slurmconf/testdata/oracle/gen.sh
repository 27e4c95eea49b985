#!/bin/sh
# Regenerate the *.oracle files next to testdata/{good,bad}/*.conf with the
# real Slurm 22.05 library (Debian libslurm-dev + slurm-wlm). Run from
# slurmd-go/pkg/slurmconf: sh testdata/oracle/gen.sh
set -eu
cc -Wall -o /tmp/slurmconf-oracle testdata/oracle/oracle.c \
	-L/usr/lib/x86_64-linux-gnu/slurm-wlm -lslurmfull \
	-Wl,-rpath,/usr/lib/x86_64-linux-gnu/slurm-wlm
for f in testdata/good/*.conf testdata/bad/*.conf; do
	if ! /tmp/slurmconf-oracle "$PWD/$f" >"$f.oracle" 2>/dev/null; then
		echo error >"$f.oracle"
	fi
done
