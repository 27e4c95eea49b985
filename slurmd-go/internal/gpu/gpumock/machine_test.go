//go:build linux && cgo

package gpumock

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestMachine_Command: the control lines of the nvmlmock build change what
// NVML answers; bad lines are errors, not panics.
func TestMachine_Command(t *testing.T) {
	m := NewDGXH100(Options{})
	for _, l := range []string{"util 2 87 41", "procs 2 4242:3072,7:1", "remap 5 1", "fabric 6 2", "xid 3 79"} {
		if err := m.Command(l); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
	}
	if u, _ := m.GPUs[2].GetUtilizationRates(); u != (nvml.Utilization{Gpu: 87, Memory: 41}) {
		t.Errorf("util %+v", u)
	}
	if ps, _ := m.GPUs[2].GetComputeRunningProcesses(); len(ps) != 2 || ps[0].Pid != 4242 || ps[0].UsedGpuMemory != 3072<<20 {
		t.Errorf("procs %+v", ps)
	}
	if _, _, _, failed, _ := m.GPUs[5].GetRemappedRows(); !failed {
		t.Error("remap failure not set")
	}
	es, _ := m.EventSetCreate()
	e, ret := es.Wait(uint32((10 * time.Second).Milliseconds()))
	if ret != nvml.SUCCESS || e.EventData != 79 || e.Device != m.GPUs[3].Device {
		t.Errorf("event %+v %v", e, ret)
	}
	for _, bad := range []string{"", "xid", "xid 9 79", "xid x 79", "remap 1 2", "util 1 5", "procs 1 12", "boom 1 1"} {
		if err := m.Command(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
