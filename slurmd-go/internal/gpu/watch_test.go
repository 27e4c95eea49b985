//go:build linux && cgo

package gpu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu/gpumock"
)

// fastWatch polls and waits briefly so the tests see changes quickly; every
// wait on them is still bounded by waitTimeout.
var fastWatch = Options{EventWait: 10 * time.Millisecond, PollInterval: 5 * time.Millisecond}

// nextEvent returns the next event that is not a CauseSync.
func nextEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("event channel closed")
			}
			if e.Cause == CauseSync {
				continue
			}
			return e
		case <-deadline:
			t.Fatalf("no event within %v", waitTimeout)
		}
	}
}

func waitSync(t *testing.T, ch <-chan Event) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case e := <-ch:
			if e.Cause == CauseSync {
				return
			}
			t.Fatalf("fault %+v before the first poll on a healthy machine", e)
		case <-deadline:
			t.Fatalf("no sync within %v", waitTimeout)
		}
	}
}

// TestWatch_Mock: XIDs injected through the mock's event set reach the
// stream (application XIDs 13, 31, 43, 45, 68 do not), as do double-bit
// ECC events, row-remap failure and recovery, and fabric state leaving and
// regaining COMPLETED.
func TestWatch_Mock(t *testing.T) {
	m := gpumock.NewDGXH100(gpumock.Options{Clique: 7})
	p := openMock(t, m, fastWatch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitSync(t, ch)

	for _, app := range []uint64{13, 31, 43, 45, 68} {
		m.InjectXID(2, app)
	}
	m.InjectXID(3, 79)
	e := nextEvent(t, ch)
	if e.Index != 3 || e.Cause != CauseXID || e.Detail != "XID 79" || e.Healthy || e.PCIBusID != "00000000:5D:00.0" || e.UUID != m.GPUs[3].UUID {
		t.Fatalf("XID event %+v", e)
	}
	m.InjectEvent(nvml.EventData{Device: m.GPUs[1].Device, EventType: nvml.EventTypeDoubleBitEccError, GpuInstanceId: NoInstance, ComputeInstanceId: NoInstance})
	if e := nextEvent(t, ch); e.Index != 1 || e.Cause != CauseECC {
		t.Fatalf("ECC event %+v", e)
	}

	m.GPUs[5].SetRemap(1, true)
	if e := nextEvent(t, ch); e.Index != 5 || e.Cause != CauseRowRemap || e.Healthy {
		t.Fatalf("remap event %+v", e)
	}
	m.GPUs[5].SetRemap(1, false)
	if e := nextEvent(t, ch); e.Index != 5 || e.Cause != CauseRowRemap || !e.Healthy {
		t.Fatalf("remap recovery %+v", e)
	}

	m.GPUs[6].SetFabric(nvml.GPU_FABRIC_STATE_IN_PROGRESS, 0)
	if e := nextEvent(t, ch); e.Index != 6 || e.Cause != CauseFabric || e.Healthy || e.Detail != "fabric state in progress" {
		t.Fatalf("fabric event %+v", e)
	}
	m.GPUs[6].SetFabric(nvml.GPU_FABRIC_STATE_COMPLETED, 0)
	if e := nextEvent(t, ch); e.Index != 6 || e.Cause != CauseFabric || !e.Healthy {
		t.Fatalf("fabric recovery %+v", e)
	}

	cancel()
	deadline := time.After(waitTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Watch did not close its channel after ctx ended")
		}
	}
}

// TestHealth_MockXIDDrainsAndRestartResumes: an XID from the mock drains
// the node through the Drainer with a "gpu:" reason naming the GPU; a
// "restarted" daemon (new provider, same state file) whose first poll
// finds the GPUs healthy resumes exactly that drain.
func TestHealth_MockXIDDrainsAndRestartResumes(t *testing.T) {
	state := t.TempDir() + "/gpu-drain"
	d := newFakeDrainer()
	run := func(m *gpumock.Machine) (context.CancelFunc, chan error) {
		p := openMock(t, m, fastWatch)
		h, err := NewHealth(HealthConfig{Drainer: d, StatePath: state})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := p.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx, ch) }()
		return cancel, done
	}
	m := gpumock.NewDGXH100(gpumock.Options{})
	cancel, done := run(m)
	m.InjectXID(4, 31) // application XID: ignored
	m.InjectXID(4, 94)
	const want = "gpu: GPU 4 (00000000:9A:00.0): XID 94"
	if c := d.next(t); c != (call{"drain", want}) {
		t.Fatalf("call %v, want drain %q", c, want)
	}
	cancel()
	<-done

	cancel, done = run(gpumock.NewDGXH100(gpumock.Options{}))
	defer func() { cancel(); <-done }()
	if c := d.next(t); c != (call{"resume", want}) {
		t.Fatalf("after restart: %v, want resume %q", c, want)
	}
}

// TestSample_Mock reads the mock's telemetry: values the mock sets per GPU
// and processes with their pids.
func TestSample_Mock(t *testing.T) {
	m := gpumock.NewDGXH100(gpumock.Options{})
	m.GPUs[2].SetUtil(87, 41)
	m.GPUs[2].SetProcesses(nvml.ProcessInfo{Pid: 4242, UsedGpuMemory: 3 << 30, GpuInstanceId: NoInstance, ComputeInstanceId: NoInstance})
	p := openMock(t, m, Options{})
	ss, err := p.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 8 {
		t.Fatalf("%d samples", len(ss))
	}
	s := ss[2]
	all := HasUtil | HasMemory | HasPower | HasEnergy | HasTemp | HasSMClock | HasMemClock | HasPCIeReplay | HasECC | HasRemap | HasProcesses |
		HasFBReserved | HasEncDec | HasPowerLimit
	if s.Has != all {
		t.Fatalf("Has = %b, want %b", s.Has, all)
	}
	if s.GPUUtil != 87 || s.MemCopyUtil != 41 || s.FBUsedMiB != 3072 || s.FBFreeMiB != 81920-512-3072 || s.FBReservedMiB != 512 || s.Minor != 2 || s.DecUtil != 2 || s.PowerLimitW != 700 ||
		s.PowerW != 102 || s.TempC != 32 || s.SMClockMHz != 1980 || s.MemClockMHz != 2619 || s.PCIeReplays != 2 ||
		s.EnergyMJ != 5000002 || s.ECCCorrected != 2 || s.UUID != m.GPUs[2].UUID || s.PCIBusID != "00000000:3A:00.0" {
		t.Fatalf("sample %+v", s)
	}
	if len(s.Processes) != 1 || s.Processes[0] != (Process{PID: 4242, UsedMemoryMiB: 3072, GPUInstanceID: NoInstance, ComputeInstanceID: NoInstance}) {
		t.Fatalf("processes %+v", s.Processes)
	}
	if !strings.HasPrefix(s.Name, "NVIDIA H100") {
		t.Fatalf("name %q", s.Name)
	}
	d := s.DCGM()
	for k, want := range map[string]float64{"DCGM_FI_DEV_GPU_UTIL": 87, "DCGM_FI_DEV_MEM_COPY_UTIL": 41, "DCGM_FI_DEV_FB_USED": 3072,
		"DCGM_FI_DEV_FB_RESERVED": 512, "DCGM_FI_DEV_POWER_USAGE": 102, "DCGM_FI_DEV_GPU_TEMP": 32, "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
		"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 5000002, "DCGM_FI_DEV_POWER_MGMT_LIMIT": 700} {
		if d[k] != want {
			t.Errorf("%s = %v, want %v", k, d[k], want)
		}
	}
	if _, ok := d["DCGM_FI_DEV_XID_ERRORS"]; ok {
		t.Error("no XID seen yet, but DCGM_FI_DEV_XID_ERRORS is set")
	}
}

// TestSample_LastXID: the last XID Watch saw (application ones included,
// as dcgm-exporter) is exported as DCGM_FI_DEV_XID_ERRORS.
func TestSample_LastXID(t *testing.T) {
	m := gpumock.NewDGXH100(gpumock.Options{})
	p := openMock(t, m, fastWatch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := p.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitSync(t, ch)
	m.InjectXID(6, 79)
	m.InjectXID(6, 13) // application XID: no fault, but the last XID
	m.InjectXID(0, 48)
	if e := nextEvent(t, ch); e.Index != 6 {
		t.Fatalf("event %+v", e)
	}
	if e := nextEvent(t, ch); e.Index != 0 { // XID 13 was seen before this one
		t.Fatalf("event %+v", e)
	}
	ss, err := p.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ss[6].DCGM()["DCGM_FI_DEV_XID_ERRORS"]; !ok || v != 13 {
		t.Fatalf("GPU 6 XID %v %v, want 13", v, ok)
	}
	if _, ok := ss[1].DCGM()["DCGM_FI_DEV_XID_ERRORS"]; ok {
		t.Fatal("GPU 1 saw no XID")
	}
}

// TestDevices_Fabric: the fabric clique is kept for the topology work.
func TestDevices_Fabric(t *testing.T) {
	p := openMock(t, gpumock.NewDGXH100(gpumock.Options{Clique: 7}), Options{})
	devs, err := p.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := devs[0].Fabric
	if !f.Supported || f.CliqueID != 7 || f.State != FabricCompleted || f.ClusterUUID != "30313233-3435-3637-3839-616263646566" {
		t.Fatalf("fabric %+v", f)
	}
	if devs[0].NVLinksToSwitch != 18 || devs[0].NVLinksToGPU != 0 {
		t.Fatalf("links %+v", devs[0])
	}
	p = openMock(t, gpumock.NewDGXH100(gpumock.Options{}), Options{})
	devs, _ = p.Devices(context.Background())
	if devs[0].Fabric.Supported {
		t.Fatalf("DGX H100 without fabric manager: %+v", devs[0].Fabric)
	}
}
