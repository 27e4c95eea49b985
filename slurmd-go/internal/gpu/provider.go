//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
)

// provider is the NVML-backed Provider. NVML is thread-safe; mu only
// guards the lazily read CPU map and closed.
type provider struct {
	lib nvml.Interface
	o   Options
	log hclog.Logger

	mu      sync.Mutex
	cpuMap  *CPUMap        // guarded by mu
	closed  bool           // guarded by mu
	lastXID map[int]uint64 // guarded by mu; by GPU index, from Watch
}

var _ Provider = (*provider)(nil)

func newProvider(lib nvml.Interface, o Options, log hclog.Logger) *provider {
	return &provider{lib: lib, o: o, log: log, cpuMap: o.CPUMap, lastXID: map[int]uint64{}}
}

func nvErr(what string, ret nvml.Return) error {
	return fmt.Errorf("%w: %s: %s", ErrNVML, what, ret.Error())
}

func (p *provider) Reason() string { return "" }

func (p *provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if ret := p.lib.Shutdown(); ret != nvml.SUCCESS {
		return nvErr("Shutdown", ret)
	}
	return nil
}

func (p *provider) cpus() (*CPUMap, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cpuMap == nil {
		m, err := ReadCPUMap(p.o.SysRoot)
		if err != nil {
			return nil, err
		}
		p.cpuMap = m
	}
	return p.cpuMap, nil
}

func pciBusID(pi nvml.PciInfo) string {
	b := make([]byte, 0, len(pi.BusId))
	for _, c := range pi.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// handles returns the GPUs in NVML index order (a nil entry where the
// handle could not be had) and their PCI bus ids, stock's device_lut.
func (p *provider) handles() ([]nvml.Device, []string, error) {
	n, ret := p.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil, nvErr("DeviceGetCount", ret)
	}
	devs := make([]nvml.Device, n)
	lut := make([]string, n)
	for i := 0; i < n; i++ {
		d, ret := p.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			p.log.Error("GPU handle", "index", i, "error", ret.Error())
			continue
		}
		devs[i] = d
		if pi, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			lut[i] = pciBusID(pi)
		}
	}
	return devs, lut, nil
}

// links is stock's _nvml_get_nvlink_info: per GPU of the lookup table, the
// number of active NVLinks whose far end has that PCI bus id; -1 for the
// GPU itself. Links to NVSwitches (or anything not a GPU here) count
// nowhere. Also returns the active links by remote kind.
func links(d nvml.Device, self int, lut []string) (string, int, int) {
	counts := make([]int, len(lut))
	counts[self] = -1
	toGPU, toSwitch := 0, 0
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret := d.GetNvLinkState(l)
		if ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret == nvml.ERROR_NOT_SUPPORTED {
			break
		}
		if ret != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
			continue
		}
		pi, ret := d.GetNvLinkRemotePciInfo(l)
		if ret != nvml.SUCCESS {
			continue
		}
		remote := pciBusID(pi)
		found := false
		for k, b := range lut {
			if b == remote && b != "" {
				found = true
				if k != self {
					counts[k]++
					toGPU++
				}
				break
			}
		}
		if !found {
			toSwitch++
		}
	}
	return joinInts(counts), toGPU, toSwitch
}

// WithRelease returns a detector over the same NVML naming as release v.
func (p *provider) WithRelease(v uint16) gres.Detector {
	return releaseDetector{p: p, v: v}
}

type releaseDetector struct {
	p *provider
	v uint16
}

func (r releaseDetector) Detect(ctx context.Context, req gres.DetectRequest) ([]gres.Record, error) {
	return r.p.detect(ctx, req, r.v)
}

// Detect names records for Options.Release.
func (p *provider) Detect(ctx context.Context, req gres.DetectRequest) ([]gres.Record, error) {
	return p.detect(ctx, req, p.o.Release)
}

// detect follows gpu_nvml.c's _get_system_gpu_list_nvml of release rel.
func (p *provider) detect(ctx context.Context, req gres.DetectRequest, rel uint16) ([]gres.Record, error) {
	if req.AutoDetect != gres.AutoDetectNVML {
		// gpu/rsmi, gpu/oneapi, gpu/nrt and 24.11's sysfs gpu/nvidia are
		// not implemented: as a node without that library.
		return nil, fmt.Errorf("%w: AutoDetect=%s is not supported by slurmd-go (only nvml)", gres.ErrNoLibrary, req.AutoDetect)
	}
	cm, err := p.cpus()
	if err != nil {
		return nil, err
	}
	devs, lut, err := p.handles()
	if err != nil {
		return nil, err
	}
	driver, _ := p.lib.SystemGetDriverVersion()
	p.log.Debug("NVML", "driver", driver, "devices", len(devs))
	// 22.05 sets nvidia_gpu_env; 24.11 on also GRES_CONF_AUTODETECT (the
	// loader marks every detected record so anyway).
	flags := gres.Flags{EnvNVML: true, Autodetected: true}
	var out []gres.Record
	var minors MIGMinors // read at the first MIG GPU
	words := cm.MaxCPU()/64 + 1
	for i, d := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d == nil {
			// Stock adds a bare record for a GPU it cannot open.
			out = append(out, gres.Record{Name: "gpu", Count: 1, CPUCnt: req.CPUs, Flags: flags})
			continue
		}
		name, _ := d.GetName()
		gpuType := typeName(name)
		uuid, _ := d.GetUUID()
		minor, ret := d.GetMinorNumber()
		if ret != nvml.SUCCESS {
			p.log.Error("GPU minor number", "index", i, "error", ret.Error())
			continue
		}
		mask, ret := d.GetCpuAffinity(words)
		if ret != nvml.SUCCESS {
			p.log.Error("GPU CPU affinity", "index", i, "error", ret.Error())
		}
		cores, err := cm.Cores(mask)
		if err != nil {
			p.log.Error("GPU cores", "index", i, "error", err)
			continue
		}
		nvlinks, _, _ := links(d, i, lut)
		file := fmt.Sprintf("/dev/nvidia%d", minor)
		base := gres.Record{Name: "gpu", Count: 1, Cores: cores, CPUCnt: req.CPUs, Flags: flags}

		added := false
		if cur, _, ret := d.GetMigMode(); ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE {
			if minors == nil {
				if minors, err = ReadMIGMinors(p.o.MIGMinorsPath); err != nil {
					p.log.Error("MIG minors", "error", err)
					minors = MIGMinors{}
				}
			}
			if rel >= release2605 {
				base.Flags.MIG = true // set for the GPU, so also on its whole-GPU fallback
			}
			recs := p.migRecords(d, i, minor, uuid, gpuType, file, driver, minors, base, rel)
			out = append(out, recs...)
			added = len(recs) > 0
			if !added && rel < release2411 {
				// 22.05 stops short (fatal) on a MIG GPU without
				// instances; later releases register the whole GPU.
				p.log.Error("MIG mode is enabled, but no MIG devices were found", "index", i)
				continue
			}
		}
		if !added {
			r := base
			r.Type, r.File, r.Links = gpuType, file, nvlinks
			if rel >= release2605 {
				r.UniqueID = uuid
			}
			out = append(out, r)
		}
		p.log.Debug("GPU", "index", i, "name", name, "uuid", uuid, "file", file, "cores", cores, "links", nvlinks)
	}
	p.log.Info("GPU system devices detected", "count", len(devs))
	return out, nil
}

func (p *provider) migRecords(d nvml.Device, i, minor int, uuid, gpuType, file, driver string, minors MIGMinors, base gres.Record, rel uint16) []gres.Record {
	max, ret := d.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		p.log.Error("MIG device count", "index", i, "error", ret.Error())
		return nil
	}
	var migs []nvml.Device
	for j := 0; j < max; j++ {
		m, ret := d.GetMigDeviceHandleByIndex(j)
		if ret != nvml.SUCCESS {
			break // indexes are contiguous from 0
		}
		migs = append(migs, m)
	}
	var out []gres.Record
	for j, m := range migs {
		migUUID, _ := m.GetUUID()
		gi, ret1 := m.GetGpuInstanceId()
		ci, ret2 := m.GetComputeInstanceId()
		if ret1 != nvml.SUCCESS {
			gi = 0
		}
		if ret2 != nvml.SUCCESS {
			ci = 0
		}
		giMinor, ciMinor, err := minors.Lookup(minor, gi, ci)
		if err != nil {
			p.log.Error("MIG instance skipped", "index", i, "mig", j, "error", err)
			continue
		}
		migName := ""
		if rel >= release2411 {
			migName, _ = m.GetName()
		}
		profile, err := migProfile(rel, migName, func() (migAttrs, error) {
			a, ret := m.GetAttributes()
			if ret != nvml.SUCCESS {
				return migAttrs{}, nvErr("MIG attributes", ret)
			}
			return migAttrs{GISlices: a.GpuInstanceSliceCount, CISlices: a.ComputeInstanceSliceCount, MemoryMB: a.MemorySizeMB}, nil
		})
		if err != nil {
			p.log.Error("MIG instance skipped", "index", i, "mig", j, "error", err)
			continue
		}
		r := base
		r.Type = migBase(gpuType) + profile
		r.File = fmt.Sprintf("%s,/dev/nvidia-caps/nvidia-cap%d,/dev/nvidia-caps/nvidia-cap%d", file, giMinor, ciMinor)
		r.UniqueID = migUniqueID(driver, migUUID, uuid, gi, ci)
		switch {
		case rel < release2411:
			r.Links = emptyLinks(j, len(migs))
		case rel < release2605:
			r.Flags.GlobalIndex = true
		default:
			r.Flags.UUID = true
		}
		out = append(out, r)
	}
	return out
}

// Devices lists the GPUs with identity, NVLink counts and fabric.
func (p *provider) Devices(ctx context.Context) ([]Device, error) {
	devs, lut, err := p.handles()
	if err != nil {
		return nil, err
	}
	var out []Device
	for i, d := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d == nil {
			continue
		}
		dv := Device{Index: i, PCIBusID: lut[i]}
		dv.Name, _ = d.GetName()
		dv.UUID, _ = d.GetUUID()
		dv.Minor, _ = d.GetMinorNumber()
		if cur, _, ret := d.GetMigMode(); ret == nvml.SUCCESS {
			dv.MIG = cur == nvml.DEVICE_MIG_ENABLE
		}
		_, dv.NVLinksToGPU, dv.NVLinksToSwitch = links(d, i, lut)
		dv.Fabric = fabricOf(d)
		out = append(out, dv)
	}
	return out, nil
}

func fabricOf(d nvml.Device) Fabric {
	fi, ret := d.GetGpuFabricInfo()
	if ret != nvml.SUCCESS || fi.State == nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
		return Fabric{}
	}
	u := fi.ClusterUuid
	return Fabric{
		Supported:   true,
		ClusterUUID: fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]),
		CliqueID:    fi.CliqueId,
		State:       FabricState(fi.State),
		Status:      fi.Status,
	}
}

// Sample reads every GPU once.
func (p *provider) Sample(ctx context.Context) ([]Sample, error) {
	devs, lut, err := p.handles()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Sample
	for i, d := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if d == nil {
			continue
		}
		s := Sample{Index: i, PCIBusID: lut[i], Time: now}
		s.Minor, _ = d.GetMinorNumber()
		s.UUID, _ = d.GetUUID()
		s.Name, _ = d.GetName()
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			s.GPUUtil, s.MemCopyUtil = u.Gpu, u.Memory
			s.Has |= HasUtil
		}
		if m, ret := d.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
			s.FBUsedMiB, s.FBFreeMiB, s.FBReservedMiB = m.Used>>20, m.Free>>20, m.Reserved>>20
			s.Has |= HasMemory | HasFBReserved
		} else if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.FBUsedMiB, s.FBFreeMiB = m.Used>>20, m.Free>>20
			s.Has |= HasMemory
		}
		enc, _, ret1 := d.GetEncoderUtilization()
		dec, _, ret2 := d.GetDecoderUtilization()
		if ret1 == nvml.SUCCESS && ret2 == nvml.SUCCESS {
			s.EncUtil, s.DecUtil = enc, dec
			s.Has |= HasEncDec
		}
		if mw, ret := d.GetPowerManagementLimit(); ret == nvml.SUCCESS {
			s.PowerLimitW = float64(mw) / 1000
			s.Has |= HasPowerLimit
		}
		p.mu.Lock()
		if x, ok := p.lastXID[i]; ok {
			s.LastXID = x
			s.Has |= HasXID
		}
		p.mu.Unlock()
		if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			s.PowerW = float64(mw) / 1000
			s.Has |= HasPower
		}
		if e, ret := d.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
			s.EnergyMJ = e
			s.Has |= HasEnergy
		}
		if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			s.TempC = t
			s.Has |= HasTemp
		}
		if c, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			s.SMClockMHz = c
			s.Has |= HasSMClock
		}
		if c, ret := d.GetClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
			s.MemClockMHz = c
			s.Has |= HasMemClock
		}
		if r, ret := d.GetPcieReplayCounter(); ret == nvml.SUCCESS {
			s.PCIeReplays = uint64(r)
			s.Has |= HasPCIeReplay
		}
		unc, ret1 := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		cor, ret2 := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		if ret1 == nvml.SUCCESS && ret2 == nvml.SUCCESS {
			s.ECCUncorrected, s.ECCCorrected = unc, cor
			s.Has |= HasECC
		}
		if c, u, pending, failed, ret := d.GetRemappedRows(); ret == nvml.SUCCESS {
			s.RemappedCorr, s.RemappedUncorr = uint64(c), uint64(u)
			s.RemapPending, s.RemapFailure = pending, failed
			s.Has |= HasRemap
		}
		if ps, ret := d.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
			for _, pr := range ps {
				s.Processes = append(s.Processes, Process{PID: pr.Pid, UsedMemoryMiB: pr.UsedGpuMemory >> 20,
					GPUInstanceID: pr.GpuInstanceId, ComputeInstanceID: pr.ComputeInstanceId})
			}
			s.Has |= HasProcesses
		}
		out = append(out, s)
	}
	return out, nil
}
