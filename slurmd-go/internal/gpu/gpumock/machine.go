//go:build linux && cgo

package gpumock

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// DGX H100 PCI bus ids of GPUs 0-7, as nvidia-smi shows them on a DGX H100.
var dgxBusIDs = []string{
	"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
	"00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0",
}

// nvSwitchBusIDs are the four NVSwitches of a DGX H100 board.
var nvSwitchBusIDs = []string{"00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0"}

// Links per H100 SXM5 (NVLink 4).
const h100Links = 18

// Options shape a Machine.
type Options struct {
	// SocketCPUs lists the machine CPU ids of each socket; GPUs 0-3 are
	// local to socket 0 and 4-7 to the last one. Default: DGXH100Sockets.
	SocketCPUs [][]int
	// DirectNVLinks wires GPU i with two NVLinks to each of GPUs i+1, i+2
	// and i+3 (mod 8), the rest of its links to NVSwitches; default: all
	// 18 links to NVSwitches, as on a DGX H100.
	DirectNVLinks bool
	// Clique is the NVLink fabric clique id reported by every GPU; 0 means
	// the fabric is not supported (no fabric manager), as on a DGX H100.
	Clique uint32
}

// DGXH100Sockets is a DGX H100's CPU layout: two sockets of 56 cores with
// two threads each; socket 0 holds CPUs 0-55 and 112-167.
func DGXH100Sockets() [][]int {
	s := [][]int{nil, nil}
	for c := 0; c < 224; c++ {
		s[(c/56)%2] = append(s[(c/56)%2], c)
	}
	return s
}

// DGXH100Cores is that layout as abstract cores: core i (0-111) holds CPUs
// i and i+112.
func DGXH100Cores() [][]int {
	cores := make([][]int, 112)
	for i := range cores {
		cores[i] = []int{i, i + 112}
	}
	return cores
}

// GPU is one mock GPU and its settable state.
type GPU struct {
	*server.Device
	m         *Machine
	mu        sync.Mutex // guards the fields below
	fabric    nvml.GpuFabricInfo
	remapUnc  int
	remapFail bool
	util      nvml.Utilization
	procs     []nvml.ProcessInfo
	migs      []*mock.Device
}

// Machine is a mock server with eight GPUs.
type Machine struct {
	*server.Server
	GPUs   []*GPU
	events chan nvml.EventData

	mu      sync.Mutex // guards initErr
	initErr nvml.Return
}

// NewDGXH100 builds 8 x H100 80GB HBM3 (go-nvml's dgxh100).
func NewDGXH100(o Options) *Machine { return build(dgxh100.New(), o) }

// NewDGXA100 builds 8 x A100-SXM4-40GB (go-nvml's dgxa100), for MIG.
func NewDGXA100(o Options) *Machine { return build(dgxa100.New(), o) }

func build(s *server.Server, o Options) *Machine {
	if o.SocketCPUs == nil {
		o.SocketCPUs = DGXH100Sockets()
	}
	m := &Machine{Server: s, events: make(chan nvml.EventData, 64)}
	n := len(s.Devices)
	for i, d := range s.Devices {
		g := &GPU{Device: d.(*server.Device), m: m}
		g.PciBusID = dgxBusIDs[i%len(dgxBusIDs)]
		if o.Clique != 0 {
			g.fabric = nvml.GpuFabricInfo{CliqueId: o.Clique, State: nvml.GPU_FABRIC_STATE_COMPLETED}
			copy(g.fabric.ClusterUuid[:], []byte("0123456789abcdef"))
		}
		g.util = nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(5 * i)}
		sock := o.SocketCPUs[0]
		if i >= n/2 {
			sock = o.SocketCPUs[len(o.SocketCPUs)-1]
		}
		g.setFuncs(i, n, sock, o)
		m.GPUs = append(m.GPUs, g)
	}
	s.InitFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.initErr
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return m.eventSet(), nvml.SUCCESS }
	return m
}

// FailInit makes Init return ret (ERROR_LIBRARY_NOT_FOUND: a node without
// libnvidia-ml) and every other call panic, as the real library kills the
// process when called after a failed Init.
func (m *Machine) FailInit(ret nvml.Return) *Machine {
	m.mu.Lock()
	m.initErr = ret
	m.mu.Unlock()
	// A fresh mock: all its functions are unset and panic when called.
	bare := &server.Server{}
	bare.InitFunc = func() nvml.Return { return ret }
	m.Server = bare
	return m
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s) && i < 31; i++ {
		b[i] = int8(s[i])
	}
	return b
}

func (g *GPU) setFuncs(i, n int, sockCPUs []int, o Options) {
	d := g.Device
	pciDev := d.Config.PciDeviceId
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var bus uint32
		fmt.Sscanf(g.PciBusID[9:11], "%x", &bus)
		return nvml.PciInfo{BusId: busID(g.PciBusID), Bus: bus, PciDeviceId: pciDev}, nvml.SUCCESS
	}
	d.GetCpuAffinityFunc = func(words int) ([]uint, nvml.Return) {
		mask := make([]uint, words)
		for _, c := range sockCPUs {
			if c/64 < words {
				mask[c/64] |= 1 << uint(c%64)
			}
		}
		return mask, nvml.SUCCESS
	}
	// remote(l) is the bus id at the far end of link l, and whether it is a GPU.
	remote := func(l int) (string, bool) {
		if o.DirectNVLinks && l < 6 {
			return dgxBusIDs[(i+1+l%3)%n], true
		}
		return nvSwitchBusIDs[l%len(nvSwitchBusIDs)], false
	}
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l < 0 || l >= h100Links {
			return nvml.FEATURE_DISABLED, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
		if l < 0 || l >= h100Links {
			return nvml.PciInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		b, _ := remote(l)
		return nvml.PciInfo{BusId: busID(b)}, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		if l < 0 || l >= h100Links {
			return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
		}
		if _, gpu := remote(l); gpu {
			return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
		}
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.fabric.State == nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
			return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return g.fabric, nvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) {
		return 7, nvml.SUCCESS // MIG-capable GPUs have at most 7 instances
	}
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if k < 0 || k >= len(g.migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return g.migs[k], nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }

	// Telemetry: fixed, distinct per GPU, so tests can tell GPUs apart.
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.util, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		total := d.Config.MemoryMB << 20
		var used uint64
		for _, p := range g.procs {
			used += p.UsedGpuMemory
		}
		return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		total, reserved := d.Config.MemoryMB<<20, uint64(512)<<20
		var used uint64
		for _, p := range g.procs {
			used += p.UsedGpuMemory
		}
		return nvml.Memory_v2{Total: total, Reserved: reserved, Used: used, Free: total - reserved - used}, nvml.SUCCESS
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 0, 167000, nvml.SUCCESS }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return uint32(i), 167000, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return 700000, nvml.SUCCESS }        // H100 SXM5: 700 W
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(100000 + 1000*i), nvml.SUCCESS } // mW
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return uint64(5000000 + i), nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(30 + i), nvml.SUCCESS }
	d.GetClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if t == nvml.CLOCK_MEM {
			return 2619, nvml.SUCCESS
		}
		return 1980, nvml.SUCCESS
	}
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return i, nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
			return 0, nvml.SUCCESS
		}
		return uint64(i), nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return 0, g.remapUnc, false, g.remapFail, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), g.procs...), nvml.SUCCESS
	}
}

// SetRemap sets the GPU's rows remapped for uncorrectable errors and
// whether a remapping failed.
func (g *GPU) SetRemap(uncorrectable int, failure bool) {
	g.mu.Lock()
	g.remapUnc, g.remapFail = uncorrectable, failure
	g.mu.Unlock()
}

// SetFabric sets the GPU's fabric state (GPU_FABRIC_STATE_*) and status.
func (g *GPU) SetFabric(state uint8, status uint32) {
	g.mu.Lock()
	g.fabric.State, g.fabric.Status = state, status
	g.mu.Unlock()
}

// SetUtil sets the GPU's utilisation rates (percent).
func (g *GPU) SetUtil(gpu, mem uint32) {
	g.mu.Lock()
	g.util = nvml.Utilization{Gpu: gpu, Memory: mem}
	g.mu.Unlock()
}

// SetProcesses sets the compute processes running on the GPU.
func (g *GPU) SetProcesses(p ...nvml.ProcessInfo) {
	g.mu.Lock()
	g.procs = append([]nvml.ProcessInfo(nil), p...)
	g.mu.Unlock()
}

// InjectXID delivers an XID critical error event for GPU i (or a MIG
// instance of it, gi/ci NoInstance for the whole GPU).
func (m *Machine) InjectXID(i int, xid uint64) {
	m.events <- nvml.EventData{Device: m.GPUs[i].Device, EventType: nvml.EventTypeXidCriticalError,
		EventData: xid, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

// InjectEvent delivers any event.
func (m *Machine) InjectEvent(e nvml.EventData) { m.events <- e }

func (m *Machine) eventSet() nvml.EventSet {
	return &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			defer t.Stop()
			select {
			case e := <-m.events:
				return e, nvml.SUCCESS
			case <-t.C:
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
}

// MIGInstance is one GPU instance with one compute instance.
type MIGInstance struct {
	GIProfile, CIProfile int // GPU_INSTANCE_PROFILE_*, COMPUTE_INSTANCE_PROFILE_*
}

// EnableMIG puts GPU i in MIG mode and creates the instances through the
// upstream mock (so GI/CI ids are the mock's), then exposes them as MIG
// device handles ordered by GI id and CI id, as NVML does.
func (m *Machine) EnableMIG(i int, insts ...MIGInstance) error {
	g := m.GPUs[i]
	if r, _ := g.SetMigMode(nvml.DEVICE_MIG_ENABLE); r != nvml.SUCCESS {
		return fmt.Errorf("gpumock: SetMigMode: %v", r)
	}
	type mig struct {
		gi, ci   int
		giSlices uint32
		ciSlices uint32
		memMB    uint64
	}
	var ms []mig
	for _, in := range insts {
		gip, r := g.GetGpuInstanceProfileInfo(in.GIProfile)
		if r != nvml.SUCCESS {
			return fmt.Errorf("gpumock: GI profile %d: %v", in.GIProfile, r)
		}
		gi, r := g.CreateGpuInstance(&gip)
		if r != nvml.SUCCESS {
			return fmt.Errorf("gpumock: CreateGpuInstance: %v", r)
		}
		cip, r := gi.GetComputeInstanceProfileInfo(in.CIProfile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if r != nvml.SUCCESS {
			return fmt.Errorf("gpumock: CI profile %d: %v", in.CIProfile, r)
		}
		ci, r := gi.CreateComputeInstance(&cip)
		if r != nvml.SUCCESS {
			return fmt.Errorf("gpumock: CreateComputeInstance: %v", r)
		}
		gInfo, _ := gi.GetInfo()
		cInfo, _ := ci.GetInfo()
		ms = append(ms, mig{gi: int(gInfo.Id), ci: int(cInfo.Id), giSlices: gip.SliceCount, ciSlices: cip.SliceCount, memMB: gip.MemorySizeMB})
	}
	sort.Slice(ms, func(a, b int) bool {
		if ms[a].gi != ms[b].gi {
			return ms[a].gi < ms[b].gi
		}
		return ms[a].ci < ms[b].ci
	})
	var devs []*mock.Device
	for k, x := range ms {
		x := x
		// NVIDIA names MIG devices "<GPU name> MIG <g>g.<GB>gb", GB rounded up.
		name := fmt.Sprintf("%s MIG %dg.%dgb", g.Config.Name, x.giSlices, (x.memMB+1023)/1024)
		if x.ciSlices != x.giSlices {
			name = fmt.Sprintf("%s MIG %dc.%dg.%dgb", g.Config.Name, x.ciSlices, x.giSlices, (x.memMB+1023)/1024)
		}
		uuid := fmt.Sprintf("MIG-%08x-0000-4000-8000-%012x", i, k)
		devs = append(devs, &mock.Device{
			GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return name, nvml.SUCCESS },
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return x.gi, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return x.ci, nvml.SUCCESS },
			GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
				return nvml.DeviceAttributes{GpuInstanceSliceCount: x.giSlices, ComputeInstanceSliceCount: x.ciSlices, MemorySizeMB: x.memMB}, nvml.SUCCESS
			},
		})
	}
	g.mu.Lock()
	g.migs = devs
	g.mu.Unlock()
	return nil
}

// MIGMinors renders /proc/driver/nvidia-caps/mig-minors for every MIG
// instance of the machine, numbering capabilities as the driver does
// (config 1, monitor 2, then per GPU, GI and CI).
func (m *Machine) MIGMinors() string {
	var b strings.Builder
	b.WriteString("config 1\nmonitor 2\n")
	next := uint32(3)
	for _, g := range m.GPUs {
		g.mu.Lock()
		migs := g.migs
		g.mu.Unlock()
		seenGI := map[int]bool{}
		for _, d := range migs {
			gi, _ := d.GetGpuInstanceId()
			ci, _ := d.GetComputeInstanceId()
			if !seenGI[gi] {
				fmt.Fprintf(&b, "gpu%d/gi%d/access %d\n", g.Minor, gi, next)
				next++
				seenGI[gi] = true
			}
			fmt.Fprintf(&b, "gpu%d/gi%d/ci%d/access %d\n", g.Minor, gi, ci, next)
			next++
		}
	}
	return b.String()
}

var _ nvml.Interface = (*Machine)(nil)

// Command applies one control line (the nvmlmock build reads them from a
// FIFO, see gpu.MockControlEnv):
//
//	xid <gpu> <code> | remap <gpu> 0|1 | fabric <gpu> <state> |
//	util <gpu> <gpu%> <mem%> | procs <gpu> <pid>:<MiB>,...
func (m *Machine) Command(line string) error {
	fs := strings.Fields(line)
	if len(fs) < 3 {
		return fmt.Errorf("gpumock: %q: want <command> <gpu> <value>", line)
	}
	i, err := strconv.Atoi(fs[1])
	if err != nil || i < 0 || i >= len(m.GPUs) {
		return fmt.Errorf("gpumock: %q: no GPU %q", line, fs[1])
	}
	num := func(s string, bits int) (uint64, error) {
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("gpumock: %q: bad number %q", line, s)
		}
		return v, nil
	}
	g := m.GPUs[i]
	switch fs[0] {
	case "xid":
		n, err := num(fs[2], 64)
		if err != nil {
			return err
		}
		m.InjectXID(i, n)
	case "remap":
		n, err := num(fs[2], 1)
		if err != nil {
			return err
		}
		g.SetRemap(0, n == 1)
	case "fabric":
		n, err := num(fs[2], 8)
		if err != nil {
			return err
		}
		g.SetFabric(uint8(n), 0)
	case "util":
		if len(fs) != 4 {
			return fmt.Errorf("gpumock: %q: want util <gpu> <gpu%%> <mem%%>", line)
		}
		a, err := num(fs[2], 32)
		if err != nil {
			return err
		}
		b, err := num(fs[3], 32)
		if err != nil {
			return err
		}
		g.SetUtil(uint32(a), uint32(b))
	case "procs":
		var ps []nvml.ProcessInfo
		for _, p := range strings.Split(fs[2], ",") {
			pid, mib, ok := strings.Cut(p, ":")
			if !ok {
				return fmt.Errorf("gpumock: %q: want <pid>:<MiB>", line)
			}
			a, err := num(pid, 32)
			if err != nil {
				return err
			}
			b, err := num(mib, 32)
			if err != nil {
				return err
			}
			ps = append(ps, nvml.ProcessInfo{Pid: uint32(a), UsedGpuMemory: b << 20, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
		}
		g.SetProcesses(ps...)
	default:
		return fmt.Errorf("gpumock: %q: unknown command", line)
	}
	return nil
}
