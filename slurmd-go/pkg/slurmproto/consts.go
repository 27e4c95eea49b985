package slurmproto

// Protocol versions (src/common/slurm_protocol_common.h). The minor byte is
// always 0 in real releases.
const (
	Version2205 uint16 = 0x2600 // SLURM_22_05_PROTOCOL_VERSION (38<<8)
	Version2108 uint16 = 0x2500 // SLURM_21_08_PROTOCOL_VERSION
	Version2011 uint16 = 0x2400 // SLURM_20_11_PROTOCOL_VERSION
	// MinVersion is SLURM_MIN_PROTOCOL_VERSION of a 22.05 daemon.
	MinVersion = Version2011
	// CurrentVersion is what we speak when we start a conversation.
	CurrentVersion = Version2205
	// MaxHeaderVersion is the highest version whose header layout we know.
	MaxHeaderVersion uint16 = 0x26ff
)

// Size limits (src/common/pack.h).
const (
	MaxMessageSize = 1 << 30 // MAX_MSG_SIZE: largest frame Slurm will read
	MaxPackMemLen  = 1 << 30 // MAX_PACK_MEM_LEN: largest packmem/packstr
)

// Sentinel values (slurm/slurm.h).
const (
	NoVal      uint32 = 0xfffffffe
	NoVal16    uint16 = 0xfffe
	NoVal8     uint8  = 0xfe
	NoVal64    uint64 = 0xfffffffffffffffe
	Infinite   uint32 = 0xffffffff
	Infinite16 uint16 = 0xffff
	Infinite8  uint8  = 0xff
	Infinite64 uint64 = 0xffffffffffffffff
)

// Special step ids (slurm/slurm.h).
const (
	StepIDInteractive uint32 = 0xfffffffa // SLURM_INTERACTIVE_STEP
	StepIDBatch       uint32 = 0xfffffffb // SLURM_BATCH_SCRIPT
	StepIDExtern      uint32 = 0xfffffffc // SLURM_EXTERN_CONT
	StepIDPending     uint32 = 0xfffffffd // SLURM_PENDING_STEP
)

// Auth plugin ids (slurm/slurm.h), the first u32 of the auth block.
const (
	AuthPluginNone  uint32 = 100
	AuthPluginMunge uint32 = 101
	AuthPluginJWT   uint32 = 102
)

// Header flags (slurm_protocol_common.h).
const (
	FlagGlobalAuthKey       uint16 = 0x01 // SLURM_GLOBAL_AUTH_KEY
	FlagSlurmdbdConnection  uint16 = 0x02 // SLURMDBD_CONNECTION
	FlagKeepBuffer          uint16 = 0x04 // SLURM_MSG_KEEP_BUFFER
	FlagDropPriv            uint16 = 0x08 // SLURM_DROP_PRIV
	FlagUseBcastNetwork     uint16 = 0x10 // USE_BCAST_NETWORK
	FlagCtldQueueProcessing uint16 = 0x20 // CTLD_QUEUE_PROCESSING
)

// Registration flags (slurm_protocol_defs.h SLURMD_REG_FLAG_*).
const (
	// RegFlagResp asks ctld for a RESPONSE_NODE_REGISTRATION (TRES list)
	// instead of a plain RESPONSE_SLURM_RC. 0x0001 is unused in 22.05.
	RegFlagResp uint16 = 0x0002
)

// Dynamic node types (slurm_protocol_defs.h dynamic_node_type_t).
const (
	DynNodeNone   uint8 = 0
	DynNodeFuture uint8 = 1 // slurmd -F
	DynNodeNorm   uint8 = 2 // slurmd -Z
)

// Select plugin ids packed as select_jobinfo (plugins/select/*).
const (
	SelectPluginConsRes  uint32 = 101
	SelectPluginLinear   uint32 = 102
	SelectPluginConsTres uint32 = 109
)
