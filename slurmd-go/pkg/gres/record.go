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
	CPUCnt   uint32 // the node's CPU count that Cores indexes (gres_slurmd_conf_t.cpu_cnt)
	// Flags as gres.conf and autodetection set them (release-neutral; the
	// codec maps them to each release's GRES_CONF_* bits).
	Flags Flags
}

// Flags are a record's Flags= and the properties stock derives for it.
type Flags struct {
	HasFile      bool // File= or MultipleFiles= given (GRES_CONF_HAS_FILE)
	HasType      bool // Type= given (GRES_CONF_HAS_TYPE)
	Multiple     bool // MultipleFiles=: all files are one device (GRES_CONF_HAS_MULT)
	EnvDefault   bool // env flags were defaulted, not written (GRES_CONF_ENV_DEF)
	Explicit     bool // Flags=explicit (24.11 on): only when asked for by name
	GlobalIndex  bool // 24.11's GRES_CONF_GLOBAL_INDEX
	UUID         bool // 26.05's Flags=nvidia_gpu_env... UUID env (GRES_CONF_UUID)
	MIG          bool // 26.05: the record is an NVIDIA MIG instance (GRES_CONF_MIG)
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
