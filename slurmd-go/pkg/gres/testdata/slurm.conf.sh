#!/usr/bin/env bash
# Prints the slurm.conf of a gres test case run in directory $1 (its
# node.conf appended): what capture.sh gives stock slurmd -G and what
# load_test.go gives Load. DebugFlags=Gres makes -G print the records.
d=$1
cat <<EOC
ClusterName=gres
SlurmctldHost=localhost
SlurmctldPort=28490
SlurmdPort=28491
AuthType=auth/munge
SlurmdSpoolDir=$d/spool
StateSaveLocation=$d/state
SlurmdPidFile=$d/slurmd.pid
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
DebugFlags=Gres
EOC
cat "$d/node.conf"
echo "PartitionName=p Nodes=ALL Default=yes"
