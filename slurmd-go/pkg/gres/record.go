package gres

// Record is one GRES record of a node: one gres.conf line for this node, or
// one device that autodetection found (gres_slurmd_conf_t).
type Record struct {
	Name     string // "gpu", "shard", "mps", "nic", ...
	Type     string // "a100", "nvidia_h100_80gb_hbm3"; "" when untyped
	Count    uint64 // devices (or shares, for shard and mps)
	File     string // device file expression as written, "/dev/nvidia[0-3]"; "" when none
	Cores    string // abstract core ids as written, "0-31"; "" when any
	Links    string // NVLink counts to every GPU in PCI order, -1 for itself: "-1,18,18"
	UniqueID string // MIG: "MIG-<uuid>/<gi>/<ci>"; "" otherwise
	// Flags as gres.conf and autodetection set them (release-neutral; the
	// codec maps them to each release's GRES_CONF_* bits).
	Flags Flags
}

// Flags are a record's Flags= and the properties stock derives for it.
type Flags struct {
	CountOnly    bool // Flags=CountOnly: no plugin loaded for it
	EnvNVML      bool // nvidia_gpu_env: CUDA_VISIBLE_DEVICES and friends
	EnvRSMI      bool // amd_gpu_env
	EnvOneAPI    bool // intel_gpu_env
	EnvOpenCL    bool // opencl_env
	NoGPUEnv     bool // no_gpu_env
	OneSharing   bool // one_sharing (shard/mps)
	Shared       bool // shared: a device may be shared by shard/mps jobs
	Autodetected bool // found by AutoDetect=, not written in gres.conf
}
