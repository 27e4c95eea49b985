package gpu

import (
	"context"
	"errors"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
)

// Errors.
var (
	// ErrNoNVML: NVML is not available on this node (no library, no
	// driver, or a build without cgo). The Null provider returns it.
	ErrNoNVML = errors.New("gpu: NVML not available")
	// ErrNVML wraps a failed NVML call.
	ErrNVML = errors.New("gpu: NVML call failed")
	// ErrMIGMinors: /proc/driver/nvidia-caps/mig-minors is missing or
	// lacks an entry.
	ErrMIGMinors = errors.New("gpu: mig-minors")
)

// Detector finds the node's GPUs for gres.conf's AutoDetect=nvml
// (gres.Detector): one record per GPU, or per MIG instance of a GPU in MIG
// mode, in NVML index order, named for the release WithRelease chose. Any
// goroutine.
type Detector interface {
	gres.Detector
	// WithRelease returns the detector naming records as the gpu/nvml
	// plugin of release v (a protocol version) does.
	WithRelease(v uint16) gres.Detector
}

// Sampler reads the current telemetry of every GPU, for the metrics server.
type Sampler interface {
	// Sample reads every GPU once. A value NVML does not provide on a GPU
	// is left unset (its Has bit clear), never reported as zero. Any
	// goroutine.
	Sample(ctx context.Context) ([]Sample, error)
}

// Watcher streams GPU faults and their recovery.
type Watcher interface {
	// Watch sends health events until ctx ends, then closes the channel.
	// Call it once. Any goroutine.
	Watch(ctx context.Context) (<-chan Event, error)
}

// Provider is everything the daemon uses of the GPUs.
type Provider interface {
	Detector
	Sampler
	Watcher
	// Devices lists the GPUs (not MIG instances) with their identity and
	// NVLink fabric information. Any goroutine.
	Devices(ctx context.Context) ([]Device, error)
	// Reason says why this is the Null provider ("" for a real one).
	Reason() string
	// Close releases NVML (Shutdown). Any goroutine, once.
	Close() error
}

// Device is one physical GPU.
type Device struct {
	Index    int    // NVML index (PCI bus order)
	Minor    int    // /dev/nvidia<Minor>
	UUID     string // "GPU-..."
	Name     string // NVML name, "NVIDIA H100 80GB HBM3"
	PCIBusID string // "00000000:1B:00.0"
	MIG      bool   // MIG mode enabled now
	Fabric   Fabric
	// NVLinks counts active NVLinks by the kind of device at the far end
	// (GPU-to-GPU links also appear in the record's Links).
	NVLinksToGPU, NVLinksToSwitch int
}

// Fabric is the GPU's NVLink fabric membership (nvmlDeviceGetGpuFabricInfo):
// GPUs with the same ClusterUUID and CliqueID share one NVLink domain
// (an NVL72 rack, for instance); the topology work maps it to blocks.
type Fabric struct {
	Supported   bool   // false on GPUs without a fabric manager (no NVSwitch fabric)
	ClusterUUID string // canonical UUID text; "" when not supported
	CliqueID    uint32
	State       FabricState
	Status      uint32 // nvmlReturn_t of the registration; 0 = success
}

// FabricState is nvmlGpuFabricState_t.
type FabricState uint8

// Fabric states.
const (
	FabricNotSupported FabricState = 0
	FabricNotStarted   FabricState = 1
	FabricInProgress   FabricState = 2
	FabricCompleted    FabricState = 3
)

func (s FabricState) String() string {
	switch s {
	case FabricNotSupported:
		return "not supported"
	case FabricNotStarted:
		return "not started"
	case FabricInProgress:
		return "in progress"
	case FabricCompleted:
		return "completed"
	}
	return "unknown"
}

// Sample is one reading of one GPU. Units are NVML's unless named.
type Sample struct {
	Index    int
	Minor    int // /dev/nvidia<Minor>
	UUID     string
	PCIBusID string
	Name     string
	Time     time.Time
	Has      Has // which of the fields below NVML provided

	GPUUtil        uint32  // percent of time a kernel ran (DCGM_FI_DEV_GPU_UTIL)
	MemCopyUtil    uint32  // percent of time memory was read or written (_MEM_COPY_UTIL)
	FBUsedMiB      uint64  // frame buffer used, MiB (_FB_USED)
	FBFreeMiB      uint64  // frame buffer free, MiB (_FB_FREE)
	FBReservedMiB  uint64  // reserved by the driver, MiB (_FB_RESERVED; nvmlDeviceGetMemoryInfo_v2)
	EncUtil        uint32  // encoder utilisation, percent (_ENC_UTIL)
	DecUtil        uint32  // decoder utilisation, percent (_DEC_UTIL)
	PowerLimitW    float64 // power management limit (_POWER_MGMT_LIMIT)
	PowerW         float64
	EnergyMJ       uint64 // total energy since the driver loaded, millijoules (_TOTAL_ENERGY_CONSUMPTION)
	TempC          uint32
	SMClockMHz     uint32
	MemClockMHz    uint32
	PCIeReplays    uint64
	ECCUncorrected uint64 // volatile uncorrected ECC errors
	ECCCorrected   uint64 // volatile corrected ECC errors
	RemappedCorr   uint64 // rows remapped for correctable errors
	RemappedUncorr uint64 // rows remapped for uncorrectable errors
	RemapPending   bool
	RemapFailure   bool
	LastXID        uint64 // the last XID seen by Watch, application XIDs included (_XID_ERRORS)
	Processes      []Process
}

// Has marks the fields of a Sample that NVML provided.
type Has uint32

// Sample fields.
const (
	HasUtil Has = 1 << iota
	HasMemory
	HasPower
	HasEnergy
	HasTemp
	HasSMClock
	HasMemClock
	HasPCIeReplay
	HasECC
	HasRemap
	HasProcesses
	HasFBReserved
	HasEncDec
	HasPowerLimit
	HasXID
)

// DCGM returns the sample's values under their dcgm-exporter names
// (DCGM_FI_DEV_*, dcgm-exporter's units), only those NVML provided: what
// the metrics server exports per GPU.
func (s Sample) DCGM() map[string]float64 {
	v := map[string]float64{}
	set := func(h Has, kv ...any) {
		if s.Has&h == 0 {
			return
		}
		for i := 0; i < len(kv); i += 2 {
			v[kv[i].(string)] = kv[i+1].(float64)
		}
	}
	set(HasUtil, "DCGM_FI_DEV_GPU_UTIL", float64(s.GPUUtil), "DCGM_FI_DEV_MEM_COPY_UTIL", float64(s.MemCopyUtil))
	set(HasEncDec, "DCGM_FI_DEV_ENC_UTIL", float64(s.EncUtil), "DCGM_FI_DEV_DEC_UTIL", float64(s.DecUtil))
	set(HasMemory, "DCGM_FI_DEV_FB_USED", float64(s.FBUsedMiB), "DCGM_FI_DEV_FB_FREE", float64(s.FBFreeMiB))
	set(HasFBReserved, "DCGM_FI_DEV_FB_RESERVED", float64(s.FBReservedMiB))
	set(HasSMClock, "DCGM_FI_DEV_SM_CLOCK", float64(s.SMClockMHz))
	set(HasMemClock, "DCGM_FI_DEV_MEM_CLOCK", float64(s.MemClockMHz))
	set(HasTemp, "DCGM_FI_DEV_GPU_TEMP", float64(s.TempC))
	set(HasPower, "DCGM_FI_DEV_POWER_USAGE", s.PowerW)
	set(HasPowerLimit, "DCGM_FI_DEV_POWER_MGMT_LIMIT", s.PowerLimitW)
	set(HasEnergy, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", float64(s.EnergyMJ))
	set(HasPCIeReplay, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", float64(s.PCIeReplays))
	set(HasXID, "DCGM_FI_DEV_XID_ERRORS", float64(s.LastXID))
	set(HasECC, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", float64(s.ECCCorrected), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", float64(s.ECCUncorrected))
	fail := 0.0
	if s.RemapFailure {
		fail = 1
	}
	set(HasRemap, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", float64(s.RemappedUncorr),
		"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", float64(s.RemappedCorr), "DCGM_FI_DEV_ROW_REMAP_FAILURE", fail)
	return v
}

// Process is one process with a context on a GPU.
type Process struct {
	PID           uint32
	UsedMemoryMiB uint64
	// MIG instance of the process; both NoInstance outside MIG.
	GPUInstanceID, ComputeInstanceID uint32
}

// NoInstance is NVML's "no GPU/compute instance" id.
const NoInstance = 0xFFFFFFFF

// Event is one health change of one GPU.
type Event struct {
	Time     time.Time
	Index    int    // NVML index, -1 when the event concerns every GPU
	UUID     string // "" with Index -1
	PCIBusID string
	Cause    Cause
	// Healthy: the cause is gone (row remap or fabric recovered). XID and
	// ECC events never recover by themselves.
	Healthy bool
	Detail  string // "XID 79", "fabric state in progress", ...
}

// Cause is the kind of fault.
type Cause string

// Causes.
const (
	CauseXID        Cause = "xid"
	CauseECC        Cause = "ecc"
	CauseRowRemap   Cause = "row-remap"
	CauseFabric     Cause = "fabric"
	CauseWatchError Cause = "nvml" // the event wait itself failed
	// CauseSync is no fault: the first poll is done, so the faults sent
	// before it are the node's state at start (Health resumes a drain
	// left by an earlier run only after it).
	CauseSync Cause = "sync"
)
