package slurmproto

// Protocol versions (SLURM_xx_yy_PROTOCOL_VERSION in
// src/common/slurm_protocol_common.h): one per release, the minor byte always
// 0. release.go says which of them this package speaks in full and which it
// only reads headers of.
const (
	Version2011 uint16 = 0x2400 // 20.11
	Version2108 uint16 = 0x2500 // 21.08
	Version2205 uint16 = 0x2600 // 22.05 (38<<8)
	Version2302 uint16 = 0x2700 // 23.02
	Version2311 uint16 = 0x2800 // 23.11
	Version2405 uint16 = 0x2900 // 24.05
	Version2411 uint16 = 0x2A00 // 24.11 (42<<8)
	Version2505 uint16 = 0x2B00 // 25.05
	Version2511 uint16 = 0x2C00 // 25.11
	Version2605 uint16 = 0x2D00 // 26.05 (45<<8)
	// MinVersion is the oldest header layout this package decodes: what a
	// 22.05 slurmctld sends to nodes it has not heard from.
	MinVersion = Version2011
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
	AuthPluginSlurm uint32 = 103 // auth/slurm (24.11+): packstr(JWT)
)

// Header flags (slurm_protocol_common.h).
const (
	FlagGlobalAuthKey      uint16 = 0x01 // SLURM_GLOBAL_AUTH_KEY
	FlagSlurmdbdConnection uint16 = 0x02 // SLURMDBD_CONNECTION
	FlagKeepBuffer         uint16 = 0x04 // SLURM_MSG_KEEP_BUFFER
	// FlagDropPriv is SLURM_DROP_PRIV up to 22.05; 24.11 leaves the bit unused.
	FlagDropPriv            uint16 = 0x08
	FlagUseBcastNetwork     uint16 = 0x10 // USE_BCAST_NETWORK
	FlagCtldQueueProcessing uint16 = 0x20 // CTLD_QUEUE_PROCESSING
	// FlagNoAuthCred (SLURM_NO_AUTH_CRED, 23.11+): no auth block follows
	// the header. 24.11+ sends every reply this way.
	FlagNoAuthCred uint16 = 0x40
	// FlagPackAddrs (SLURM_PACK_ADDRS, 23.11+): the forward block carries
	// the alias addresses' net credential.
	FlagPackAddrs uint16 = 0x80
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
