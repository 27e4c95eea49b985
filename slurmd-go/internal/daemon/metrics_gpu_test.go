//go:build linux && cgo

package daemon

import (
	"context"
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu/gpumock"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/metrics"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestGPUSampler_DGXH100: internal/gpu over go-nvml's 8 x H100 mock feeds
// the metrics: one DCGM_FI_DEV_GPU_UTIL per GPU with dcgm-exporter's
// labels and the mock's values, the holder's job labels on the GPU its
// step was given, and a node without NVML exports no GPU.
func TestGPUSampler_DGXH100(t *testing.T) {
	mach := gpumock.NewDGXH100(gpumock.Options{})
	mach.GPUs[5].SetUtil(73, 20)
	p := gpu.OpenLibrary(mach, gpu.Options{})
	defer p.Close()
	m, err := metrics.New(metrics.Options{Hostname: "gpu01", Sampler: gpuSampler{provider: func() gpu.Provider { return p }}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	devs, err := p.Devices(context.Background())
	if err != nil || len(devs) != 8 {
		t.Fatalf("devices %v, %v", devs, err)
	}
	m.Jobs.StepStarted(metrics.StepStart{JobID: 31, StepID: slurmproto.StepIDBatch, User: "alice", GPUs: []int{devs[5].Minor}})
	m.Tick(context.Background())

	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var util *dto.MetricFamily
	for _, mf := range mfs {
		if mf.GetName() == string(metrics.GPUUtil) {
			util = mf
		}
	}
	if util == nil || len(util.GetMetric()) != 8 {
		t.Fatalf("GPU utilisation series: %v, want 8", util)
	}
	for _, s := range util.GetMetric() {
		l := map[string]string{}
		for _, lp := range s.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["modelName"] != "NVIDIA H100 80GB HBM3" || l["UUID"] == "" || l["pci_bus_id"] == "" || l["Hostname"] != "gpu01" || l["device"] == "" {
			t.Errorf("labels %v", l)
		}
		if l["gpu"] == "5" {
			if s.GetGauge().GetValue() != 73 || l["job_id"] != "31" || l["step"] != "batch" || l["user"] != "alice" {
				t.Errorf("GPU 5: %v = %v, want 73 held by job 31's batch step", l, s.GetGauge().GetValue())
			}
			if l["device"] != "nvidia"+itoa(devs[5].Minor) || l["UUID"] != devs[5].UUID || l["pci_bus_id"] != devs[5].PCIBusID {
				t.Errorf("GPU 5 labels %v, want device %d %s %s", l, devs[5].Minor, devs[5].UUID, devs[5].PCIBusID)
			}
		} else if l["job_id"] != "" {
			t.Errorf("GPU %s held by %s", l["gpu"], l["job_id"])
		}
	}

	null := gpu.OpenLibrary(gpumock.NewDGXH100(gpumock.Options{}).FailInit(12), gpu.Options{})
	mn, err := metrics.New(metrics.Options{Sampler: gpuSampler{provider: func() gpu.Provider { return null }}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mn.Tick(context.Background())
	mfs, _ = mn.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == string(metrics.GPUUtil) {
			t.Fatalf("a node without NVML exports %v", mf)
		}
		if mf.GetName() == "slurmd_go_gpu_sample_errors_total" && mf.GetMetric()[0].GetCounter().GetValue() != 0 {
			t.Fatalf("the Null provider's sample failed")
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
