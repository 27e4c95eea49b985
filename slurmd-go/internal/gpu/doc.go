// Package gpu owns everything slurmd-go learns from NVIDIA's management
// library (NVML, through github.com/NVIDIA/go-nvml) about the node's GPUs:
//
//   - autodetection (gres.conf AutoDetect=nvml): one gres.Record per GPU or
//     MIG instance, named as Slurm's gpu/nvml plugin names them for the
//     release the node talks to (Type, File, Cores, Links, UniqueID, Flags),
//     plus the NVLink fabric (clique) information the topology work reads;
//   - sampling: per-GPU utilisation, memory, power, energy, temperature,
//     clocks, PCIe replays, ECC and row remapping, and the processes running
//     on each GPU, for the metrics server;
//   - health: XID events (application XIDs excepted), uncorrectable ECC,
//     row-remap failures and fabric state turned into faults with a
//     "gpu: ..." reason, and the drain/resume policy over a Drainer the
//     daemon supplies (the daemon clears only drains it set).
//
// Nothing here talks to slurmctld, parses gres.conf or serves HTTP.
//
// NVML safety: go-nvml resolves NVML symbols lazily (dlopen at Init, no
// link-time dependency). Any NVML call after a failed Init ends the process
// (undefined symbol), so Open calls Init first and, if it fails, returns the
// Null provider without touching the library again; the reason is logged.
// The NVML code needs cgo (files guarded by "linux && cgo"); other builds get
// the Null provider. Binaries must not be linked with -z now (BIND_NOW): that
// resolves every NVML symbol at start-up and kills a GPU-less node.
//
// The build tag nvmlmock (bin/slurmd-go-nvmlmock only, never the production
// binary) makes Open return an 8 x H100 mock (go-nvml's dgxh100) so that the
// daemon can run on a real Slurm cluster without GPUs; see nvmlmock_open.go.
//
// Lifecycle of a Provider:
//
//	Open ──Init ok──> nvml provider ──Close──> Shutdown
//	  └──Init failed──> Null (no further NVML call, ever)
//
// Providers are safe for use from any goroutine.
package gpu
