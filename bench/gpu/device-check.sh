#!/bin/bash
# GPU machine check of slurmd-go's real NVML path (issue 13). Builds nothing:
# run `make gpu-kit` here first (bin/gpukit: slurmd-go, gpu-real.test, cudaload),
# then on the device machine, from the repository root:
#
#   run(command="bash bench/gpu/device-check.sh", carry=["bin/gpukit"], timeout_s=300)
#
# Writes everything to $OUT (the device tool's folder; else bin/gpu-check) and
# exits non-zero if a step fails. Steps:
#   1. nvidia-smi, the reference;
#   2. $K/gpu-real.test (internal/gpu, -tags nvmlreal): Open/Detect/Devices on
#      real NVML compared with nvidia-smi (UUID, bus id, name -> Type, device
#      files), then Sample during $K/cudaload (4 GiB held, memsets) compared
#      with nvidia-smi (FB used/free, temperature, power, clocks, its pid);
#   3. $K/slurmd-go -G with gres.conf AutoDetect=nvml;
#   4. the daemon with --metrics-addr=$METRICS_ADDR (default 127.0.0.1:28080;
#      no slurmctld: it serves and retries registering), one scrape during
#      cudaload, DCGM_FI_DEV_FB_USED of GPU 0 against nvidia-smi.
set -u
K=${KIT:-bin/gpukit}
OUT=${OUT:-bin/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/device-check.txt") 2>&1
fail=0
step() { echo; echo "== $*"; }

step "1 nvidia-smi"
nvidia-smi -L || fail=1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,clocks.sm,clocks.mem --format=csv | tee "$OUT/nvidia-smi.csv"
nvidia-smi topo -m || true

step "2 real NVML vs nvidia-smi (gpu-real.test)"
TIEE_GPU_LOAD=$K/cudaload GPU_CHECK_OUT="$OUT" timeout 240 $K/gpu-real.test -test.v -test.count=1 -test.run TestReal || fail=1

step "3 slurmd-go -G (AutoDetect=nvml)"
conf=$(mktemp -d)
host=$(hostname -s)
cat >"$conf/slurm.conf" <<EOC
ClusterName=gpucheck
SlurmctldHost=localhost
SlurmdPort=28018
SlurmdSpoolDir=$conf/spool
GresTypes=gpu
NodeName=$host Gres=gpu:$(nvidia-smi -L | grep -c '^GPU') State=UNKNOWN
PartitionName=p Nodes=$host Default=YES
EOC
echo "AutoDetect=nvml" >"$conf/gres.conf"
mkdir -p "$conf/spool"
timeout 60 $K/slurmd-go -G -f "$conf/slurm.conf" 2>&1 | tee "$OUT/slurmd-G.txt" || fail=1
grep -q 'Name=gpu' "$OUT/slurmd-G.txt" || { echo "FAIL: -G printed no gpu"; fail=1; }

step "4 metrics scrape during CUDA load"
METRICS_ADDR=${METRICS_ADDR:-127.0.0.1:28080}
METRICS_URL=http://$METRICS_ADDR/metrics
scrape() {
	if command -v curl >/dev/null; then curl -sf "$METRICS_URL"; else python3 -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$METRICS_URL"; fi
}
$K/slurmd-go -D -f "$conf/slurm.conf" --metrics-addr="$METRICS_ADDR" >"$OUT/slurmd.log" 2>&1 &
dpid=$!
$K/cudaload 4096 30 >"$OUT/cudaload.txt" 2>&1 &
lpid=$!
for _ in $(seq 60); do grep -q ready "$OUT/cudaload.txt" && break; sleep 1; done
for _ in $(seq 30); do scrape >"$OUT/metrics.txt" 2>/dev/null && grep -q '^DCGM_FI_DEV_FB_USED' "$OUT/metrics.txt" && break; sleep 1; done
smi=$(nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits)
ours=$(awk '/^DCGM_FI_DEV_FB_USED[{]/ && /gpu="0"/ {print int($NF); exit}' "$OUT/metrics.txt")
echo "DCGM_FI_DEV_FB_USED gpu 0: slurmd-go ${ours:-none} MiB, nvidia-smi $smi MiB"
if [ -z "$ours" ] || [ $(( ours > smi ? ours - smi : smi - ours )) -gt 512 ]; then echo "FAIL: FB used differs"; fail=1; fi
kill "$lpid" "$dpid" 2>/dev/null
wait "$lpid" "$dpid" 2>/dev/null
rm -rf "$conf"
echo
echo "device-check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
