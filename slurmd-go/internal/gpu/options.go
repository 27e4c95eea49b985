package gpu

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options configure Open.
type Options struct {
	// Release is the protocol version of the Slurm release the node talks
	// to (slurmproto.Version2205, ...): it selects gpu/nvml's naming rules.
	Release uint16
	// LibraryPath overrides libnvidia-ml.so.1 (go-nvml's default search).
	LibraryPath string
	// SysRoot is the root under which sys/devices/system/cpu is read for
	// the CPU map ("" = the host); CPUMap, when set, wins.
	SysRoot string
	CPUMap  *CPUMap
	// MIGMinorsPath overrides DefaultMIGMinorsPath.
	MIGMinorsPath string
	// EventWait bounds one NVML event wait (default 5 s, as the device
	// plugin), so Watch notices ctx ending.
	EventWait time.Duration
	// PollInterval is how often Watch polls row remapping and fabric
	// state (default 30 s).
	PollInterval time.Duration
	Logger       hclog.Logger
}

// Named timeouts and defaults.
const (
	DefaultEventWait    = 5 * time.Second
	DefaultPollInterval = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MIGMinorsPath == "" {
		o.MIGMinorsPath = DefaultMIGMinorsPath
	}
	if o.EventWait <= 0 {
		o.EventWait = DefaultEventWait
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o
}

// MockControlEnv names a FIFO the nvmlmock build (only) reads commands from, one
// per line, so that real-cluster tests can make the mock GPUs fail:
//
//	xid <gpu> <code>          an XID critical error event
//	remap <gpu> <0|1>         row-remap failure off/on
//	fabric <gpu> <state>      fabric state (GPU_FABRIC_STATE_*)
//	util <gpu> <gpu%> <mem%>  utilisation rates
//	procs <gpu> <pid>:<MiB>,...  compute processes
const MockControlEnv = "SLURMD_GO_NVMLMOCK_CTL"
