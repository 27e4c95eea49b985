package slurmconf

import (
	"strings"
	"time"
)

// Defaults of Slurm 22.05.8 (read_config.h, slurm.h, Debian's build).
// From 24.11 TreeWidth defaults to 16, SelectType to select/cons_tres,
// UnkillableStepTimeout to max(60 s, 5 * MessageTimeout), and the */none
// plugins (TaskPlugin, JobAcctGatherType, JobContainerType, SwitchType,
// MpiDefault) to "" (no plugin); see build.go.
const (
	DefaultConfFile            = "/etc/slurm/slurm.conf" // Debian's sysconfdir
	DefaultSlurmctldPort       = 6817
	DefaultSlurmdPort          = 6818
	DefaultSpoolDir            = "/var/spool/slurmd"
	DefaultPluginDir           = "/usr/lib/x86_64-linux-gnu/slurm-wlm" // Debian's libdir/slurm-wlm
	DefaultSlurmdPidFile       = "/run/slurmd.pid"
	DefaultSlurmdTimeout       = 300 * time.Second
	DefaultMessageTimeout      = 10 * time.Second
	DefaultBatchStartTimeout   = 10 * time.Second
	DefaultKillWait            = 30 * time.Second
	DefaultTCPTimeout          = 2 * time.Second
	DefaultUnkillableTimeout   = 60 * time.Second
	DefaultPrologEpilogTimeout = NoVal16 // "wait forever"
	DefaultTreeWidth           = 50
	DefaultTreeWidth2411       = 16 // 24.11 and 26.05
	DefaultAuthType            = "auth/munge"
	DefaultCredType            = "cred/munge"
	DefaultCredExpire          = 120 * time.Second // slurm_cred.c
	DefaultTmpFS               = "/tmp"
	DefaultProctrackType       = "proctrack/cgroup" // Linux builds WITH_CGROUP
	DefaultTaskPlugin          = "task/none"
	DefaultJobAcctGatherType   = "jobacct_gather/none"
	DefaultJobAcctGatherFreq   = "30"
	DefaultSelectType          = "select/linear"
	DefaultSelectType2411      = "select/cons_tres" // 24.11 and 26.05
	DefaultMpiDefault          = "none"
	DefaultJobContainerType    = "job_container/none"
	DefaultLaunchType          = "launch/slurm"
	DefaultSwitchType          = "switch/none"
	DefaultMaxTasksPerNode     = 512
	DefaultSlurmUser           = "root"
	DefaultLogLevel            = LogInfo
	DefaultHashPlugin          = "hash/k12" // 24.11 and 26.05
	DefaultTLSType             = "tls/none" // 24.11 and 26.05
	DefaultCgroupMountpoint    = "/sys/fs/cgroup"
	DefaultCgroupPlugin        = "autodetect"
	DefaultStateSaveLocation   = "/var/spool" // DEFAULT_SAVE_STATE_LOC
	DefaultGetEnvTimeout       = 2            // DEFAULT_GET_ENV_TIMEOUT of 22.05 and 24.11
)

// LogLevel is Slurm's log level number (log_string2num).
type LogLevel uint16

// Slurm log levels.
const (
	LogQuiet LogLevel = iota
	LogFatal
	LogError
	LogInfo
	LogVerbose
	LogDebug
	LogDebug2
	LogDebug3
	LogDebug4
	LogDebug5
	LogEnd // LOG_LEVEL_END: "not set" (SlurmdSyslogDebug)
)

// logLevelNames are the names of LogQuiet to LogDebug5, in order.
var logLevelNames = []string{"quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5"}

// String is log_num2string: the level's name, "(null)" for LogEnd (a
// channel not set), "unknown" past it.
func (l LogLevel) String() string {
	switch {
	case int(l) < len(logLevelNames):
		return logLevelNames[l]
	case l == LogEnd:
		return "(null)"
	}
	return "unknown"
}

// PrologFlags is the PrologFlags bit set; values are slurm.h's PROLOG_FLAG_*.
type PrologFlags uint16

// Prolog flag bits.
const (
	PrologAlloc      PrologFlags = 0x0001
	PrologNoHold     PrologFlags = 0x0002
	PrologContain    PrologFlags = 0x0004
	PrologSerial     PrologFlags = 0x0008
	PrologX11        PrologFlags = 0x0010
	PrologDeferBatch PrologFlags = 0x0020
	// 24.11 and later
	PrologForceRequeueOnFail PrologFlags = 0x0040
	PrologRunInJob           PrologFlags = 0x0080
)

// CtldHost is one SlurmctldHost entry, primary first. Name "localhost" is
// replaced by this host's short name, as Slurm does; Addr is kept.
type CtldHost struct {
	Name string
	Addr string
}

// AuthInfo is the parsed AuthInfo string.
type AuthInfo struct {
	Raw        string
	Socket     string        // munged socket; "" means the library default
	TTL        int           // munge credential TTL in seconds; 0 = munged default
	CredExpire time.Duration // job credential lifetime (cred_expire=, min 5 s)
}

// CommParams is CommunicationParameters. Slurm tests options with a
// case-insensitive substring search, and so does Has.
type CommParams struct {
	Raw string
}

// Has reports whether opt appears in the list (xstrcasestr semantics).
func (c CommParams) Has(opt string) bool {
	return strings.Contains(strings.ToLower(c.Raw), strings.ToLower(opt))
}

// BlockNullHash: reject messages whose auth credential carries no body hash.
func (c CommParams) BlockNullHash() bool { return c.Has("block_null_hash") }

// BlockZeroHash: reject credentials with the "none" hash (22.05.8 default
// is to accept them).
func (c CommParams) BlockZeroHash() bool { return c.Has("block_zero_hash") }

// NoInAddrAny: bind to the node's address instead of INADDR_ANY
// ("NoCtldInAddrAny" does not contain it).
func (c CommParams) NoInAddrAny() bool { return c.Has("NoInAddrAny") }

// EnableIPv6 and DisableIPv4 as in read_config.c.
func (c CommParams) EnableIPv6() bool  { return c.Has("EnableIPv6") }
func (c CommParams) DisableIPv4() bool { return c.Has("DisableIPv4") }

// NoAddrCache disables the address cache.
func (c CommParams) NoAddrCache() bool { return c.Has("NoAddrCache") }

// Config is a parsed slurm.conf. Field names follow the slurm.conf keys;
// every value has the release's default when the key is absent, and a
// plugin key its "no plugin" value as the release writes it (24.11 turns
// "task/none" into ""). Durations are in Slurm's unit of seconds.
type Config struct {
	File     string   // the file given to Load/Parse
	Includes []string // files read through Include, in order
	// Version is the release the file was read as (Options.Version;
	// Lenient for a lenient read).
	Version uint16
	// Hash is slurm.conf's hash_val as Slurm computes it over every raw
	// line of the file and its includes; slurmd sends it in registrations.
	Hash uint32
	// Warnings are what slurmd logs about the file and carries on: defunct
	// keys, keys given twice, values it resets. Parse-time ones first, in
	// file order.
	Warnings []Warning

	ClusterName        string // lower-cased, as Slurm does
	SlurmctldHost      []CtldHost
	SlurmctldAddr      string
	SlurmctldPort      uint16 // first port
	SlurmctldPortCount uint16 // "6817-6818" gives 6817, 2
	SlurmctldTimeout   time.Duration
	SlurmdPort         uint16

	SlurmUser    string
	SlurmUserID  uint32
	SlurmdUser   string
	SlurmdUserID uint32

	SlurmdSpoolDir string // may hold %n/%h: see ExpandPath
	SlurmdPidFile  string
	SlurmdLogFile  string
	SlurmdDebug    LogLevel
	// SlurmdSyslogDebug is LogEnd when not set.
	SlurmdSyslogDebug LogLevel
	SlurmdParameters  string
	// ConfigOverrides is SlurmdParameters containing "config_override".
	ConfigOverrides bool

	SlurmdTimeout         time.Duration
	MessageTimeout        time.Duration
	BatchStartTimeout     time.Duration
	TCPTimeout            time.Duration
	KillWait              time.Duration
	UnkillableStepTimeout time.Duration
	UnkillableStepProgram string
	PrologEpilogTimeout   uint16 // seconds; NoVal16 (the default) = wait forever
	TreeWidth             uint16

	AuthType                       string
	AuthAltTypes                   string
	AuthInfo                       AuthInfo
	CredType                       string
	CommunicationParameters        CommParams
	JobCredentialPrivateKey        string
	JobCredentialPublicCertificate string

	// Prolog and Epilog are the last Prolog/Epilog line in 22.05, the
	// first in 24.11 and later, where every line is kept in Prologs and
	// Epilogs and slurmd runs them in turn.
	Prolog  string
	Epilog  string
	Prologs []string
	Epilogs []string
	// PrologTimeout and EpilogTimeout are 26.05's split of
	// PrologEpilogTimeout; earlier releases have only PrologEpilogTimeout
	// and both equal it. NoVal16 = wait forever.
	PrologTimeout        uint16
	EpilogTimeout        uint16
	PrologFlags          PrologFlags
	TaskProlog           string
	TaskEpilog           string
	HealthCheckProgram   string
	HealthCheckInterval  time.Duration
	HealthCheckNodeState string
	RebootProgram        string

	TmpFS                         string
	ProctrackType                 string
	TaskPlugin                    string
	TaskPluginParam               string
	JobAcctGatherType             string
	JobAcctGatherFrequency        string
	JobAcctGatherParams           string
	JobContainerType              string // 22.05 and 24.11
	NamespaceType                 string // 26.05: NamespaceType, or JobContainerType when that is unset
	SelectType                    string
	SelectTypeParameters          string
	PreemptMode                   string
	SwitchType                    string
	TopologyPlugin                string
	HashPlugin                    string // 24.11+: the message body hash (hash/k12)
	TLSType                       string // 24.11+
	CertmgrType                   string // 24.11+
	LaunchParameters              string
	MpiDefault                    string
	GresTypes                     []string
	PlugStackConfig               string // effective path: plugstack.conf next to slurm.conf by default
	PluginDir                     string // colon-separated; SPANK plugins' relative paths are searched there
	ReturnToService               uint16
	MaxTasksPerNode               uint16
	JobFileAppend                 bool
	PropagateResourceLimits       string // "ALL" unless ...Except is set
	PropagateResourceLimitsExcept string
	UsePAM                        bool
	DebugFlags                    string
	// SchedulerParameters, as given: slurmd reads its no_env_cache and
	// requeue_setup_env_fail options (sbatch --get-user-env).
	SchedulerParameters string
	// SlurmctldParameters, as given: the node daemon only looks for
	// enable_stepmgr, which slurmd-go does not serve.
	SlurmctldParameters string
	// StateSaveLocation ("/var/spool" by default): slurmd 22.05 and 24.11
	// read the login environment cache from its env_cache directory.
	StateSaveLocation string
	// GetEnvTimeout (2 by default; defunct in 26.05): 0 makes slurmd
	// 22.05 and 24.11 read the cache instead of running su.
	GetEnvTimeout uint16

	// Raw holds every top-level key=value given in the files (lower-cased
	// key, last value wins), typed above or not, defunct keys excepted;
	// NodeName, PartitionName, DownNodes, NodeSet, FrontendName,
	// PowerAction and SlurmctldHost lines are not in it. Read-only.
	Raw map[string]string

	nodes      []*Node
	nodeByName map[string]*Node
	nodeByHost map[string]*Node // first node per NodeHostname
	partitions []*Partition
	downNodes  []DownNodes
	nodeSets   []NodeSet
}

// Node returns the node called name (exact, case-sensitive as in Slurm).
func (c *Config) Node(name string) (*Node, bool) {
	n, ok := c.nodeByName[name]
	return n, ok
}

// Nodes returns all nodes in file order. The slice is a copy; the nodes are
// shared and must not be modified.
func (c *Config) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// NodeByHost returns the node whose NodeHostname is host (first match, as
// slurm_conf_get_nodename).
func (c *Config) NodeByHost(host string) (*Node, bool) {
	n, ok := c.nodeByHost[host]
	return n, ok
}

// Partitions returns the partitions in file order.
func (c *Config) Partitions() []*Partition { return append([]*Partition(nil), c.partitions...) }

// DownNodes returns the DownNodes lines in file order.
func (c *Config) DownNodes() []DownNodes { return append([]DownNodes(nil), c.downNodes...) }

// NodeSets returns the NodeSet lines in file order.
func (c *Config) NodeSets() []NodeSet { return append([]NodeSet(nil), c.nodeSets...) }

// Partition is one PartitionName line with the PartitionName=DEFAULT values
// in force at that line merged in.
type Partition struct {
	Name    string
	Nodes   string // hostlist expression, node set names or "ALL"
	Default bool
	State   string // "" means UP
	MaxTime string
	// Raw holds every key of the line and its defaults, lower-cased.
	Raw  map[string]string
	File string
	Line int
}

// DownNodes is one DownNodes line.
type DownNodes struct {
	Nodes  string
	Reason string // "Set in slurm.conf" when absent
	State  string
}

// NodeSet is one NodeSet line.
type NodeSet struct {
	Name    string
	Feature string
	Nodes   string
}
