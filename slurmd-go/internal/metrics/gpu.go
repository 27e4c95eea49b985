package metrics

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Sampler reads every GPU of the node once. internal/gpu implements it over
// NVML; a node without NVML has none (Options.Sampler nil). Sample is
// called from one goroutine at a time (Metrics.Run), never at scrape time,
// so a slow NVML call does not stall a scrape.
type Sampler interface {
	Sample(ctx context.Context) ([]GPU, error)
}

// GPU is one GPU's reading.
type GPU struct {
	Index     int    // NVML index: label gpu
	Minor     int    // /dev/nvidia<minor>: label device, and the key of Holders
	UUID      string // "GPU-…": label UUID
	PCIBusID  string // "00000000:18:00.0": label pci_bus_id
	ModelName string // "NVIDIA H100 80GB HBM3": label modelName
	// Values holds what NVML provided, by dcgm-exporter name; a field
	// NVML does not provide on this GPU is absent (no series).
	Values map[Field]float64
}

// Field is a per-GPU metric under its dcgm-exporter name.
type Field string

// The dcgm-exporter fields that have NVML equivalents (k8s-anchors.md §7),
// with dcgm-exporter's units.
const (
	GPUUtil         Field = "DCGM_FI_DEV_GPU_UTIL"                    // % (nvmlDeviceGetUtilizationRates.gpu)
	MemCopyUtil     Field = "DCGM_FI_DEV_MEM_COPY_UTIL"               // % (…Rates.memory)
	EncUtil         Field = "DCGM_FI_DEV_ENC_UTIL"                    // % (nvmlDeviceGetEncoderUtilization)
	DecUtil         Field = "DCGM_FI_DEV_DEC_UTIL"                    // % (nvmlDeviceGetDecoderUtilization)
	FBUsed          Field = "DCGM_FI_DEV_FB_USED"                     // MiB (nvmlDeviceGetMemoryInfo)
	FBFree          Field = "DCGM_FI_DEV_FB_FREE"                     // MiB
	FBReserved      Field = "DCGM_FI_DEV_FB_RESERVED"                 // MiB (nvmlDeviceGetMemoryInfo_v2)
	SMClock         Field = "DCGM_FI_DEV_SM_CLOCK"                    // MHz (nvmlDeviceGetClockInfo SM)
	MemClock        Field = "DCGM_FI_DEV_MEM_CLOCK"                   // MHz (… MEM)
	GPUTemp         Field = "DCGM_FI_DEV_GPU_TEMP"                    // °C (nvmlDeviceGetTemperature)
	MemoryTemp      Field = "DCGM_FI_DEV_MEMORY_TEMP"                 // °C (field value NVML_FI_DEV_MEMORY_TEMP)
	PowerUsage      Field = "DCGM_FI_DEV_POWER_USAGE"                 // W (nvmlDeviceGetPowerUsage, mW/1000)
	TotalEnergy     Field = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"    // mJ since driver load (nvmlDeviceGetTotalEnergyConsumption)
	PCIeReplay      Field = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"         // (nvmlDeviceGetPcieReplayCounter)
	XIDErrors       Field = "DCGM_FI_DEV_XID_ERRORS"                  // the last XID seen (NVML XID events)
	NVLinkBandwidth Field = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"      // (NVML_FI_DEV_NVLINK_THROUGHPUT_*)
	UncRemapRows    Field = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS" // (nvmlDeviceGetRemappedRows)
	CorRemapRows    Field = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"   // (nvmlDeviceGetRemappedRows)
	RowRemapFailure Field = "DCGM_FI_DEV_ROW_REMAP_FAILURE"           // 1 if a remap failed (nvmlDeviceGetRemappedRows)
	ECCSBEVolTotal  Field = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"           // (nvmlDeviceGetTotalEccErrors corrected, volatile)
	ECCDBEVolTotal  Field = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"           // (… uncorrected, volatile)
	PowerMgmtLimit  Field = "DCGM_FI_DEV_POWER_MGMT_LIMIT"            // W (nvmlDeviceGetPowerManagementLimit)
)

type fieldInfo struct {
	help string
	kind prometheus.ValueType
}

// fields are every Field with dcgm-exporter's help text and type; a
// sampler value under any other name is not exported.
var fields = map[Field]fieldInfo{
	GPUUtil:         {"GPU utilization (in %).", prometheus.GaugeValue},
	MemCopyUtil:     {"Memory utilization (in %).", prometheus.GaugeValue},
	EncUtil:         {"Encoder utilization (in %).", prometheus.GaugeValue},
	DecUtil:         {"Decoder utilization (in %).", prometheus.GaugeValue},
	FBUsed:          {"Framebuffer memory used (in MiB).", prometheus.GaugeValue},
	FBFree:          {"Framebuffer memory free (in MiB).", prometheus.GaugeValue},
	FBReserved:      {"Framebuffer memory reserved (in MiB).", prometheus.GaugeValue},
	SMClock:         {"SM clock frequency (in MHz).", prometheus.GaugeValue},
	MemClock:        {"Memory clock frequency (in MHz).", prometheus.GaugeValue},
	GPUTemp:         {"GPU temperature (in C).", prometheus.GaugeValue},
	MemoryTemp:      {"Memory temperature (in C).", prometheus.GaugeValue},
	PowerUsage:      {"Power draw (in W).", prometheus.GaugeValue},
	TotalEnergy:     {"Total energy consumption since boot (in mJ).", prometheus.CounterValue},
	PCIeReplay:      {"Total number of PCIe retries.", prometheus.CounterValue},
	XIDErrors:       {"Value of the last XID error encountered.", prometheus.GaugeValue},
	NVLinkBandwidth: {"Total number of NVLink bandwidth counters for all lanes.", prometheus.CounterValue},
	UncRemapRows:    {"Number of remapped rows for uncorrectable errors", prometheus.CounterValue},
	CorRemapRows:    {"Number of remapped rows for correctable errors", prometheus.CounterValue},
	RowRemapFailure: {"Whether remapping of rows has failed", prometheus.GaugeValue},
	ECCSBEVolTotal:  {"Total number of single-bit volatile ECC errors.", prometheus.CounterValue},
	ECCDBEVolTotal:  {"Total number of double-bit volatile ECC errors.", prometheus.CounterValue},
	PowerMgmtLimit:  {"Power management limit (in W).", prometheus.GaugeValue},
}

// Fields lists every exported field (for samplers and tests).
func Fields() []Field {
	out := make([]Field, 0, len(fields))
	for f := range fields {
		out = append(out, f)
	}
	return out
}

// gpuLabels are dcgm-exporter's labels, then the holder's.
var gpuLabels = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "job_id", "step", "user"}

// gpuCollector exports the last sample, one series per GPU and field, and
// one per holder when several jobs share a GPU (shards).
type gpuCollector struct {
	m     *Metrics
	descs map[Field]*prometheus.Desc
}

func newGPUCollector(m *Metrics) *gpuCollector {
	c := &gpuCollector{m: m, descs: make(map[Field]*prometheus.Desc, len(fields))}
	for f, fi := range fields {
		c.descs[f] = prometheus.NewDesc(string(f), fi.help, gpuLabels, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector; any goroutine (a scrape).
func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	gpus, holders := c.m.lastSample()
	for _, g := range gpus {
		hs := holders[g.Minor]
		if len(hs) == 0 {
			hs = []Holder{{}} // an idle GPU: empty job labels, as dcgm-exporter's without a job
		}
		for _, h := range hs {
			lv := []string{strconv.Itoa(g.Index), g.UUID, g.PCIBusID, "nvidia" + strconv.Itoa(g.Minor), g.ModelName, c.m.hostname,
				h.jobLabel(), h.Step, h.User}
			for f, v := range g.Values {
				d, ok := c.descs[f]
				if !ok {
					continue
				}
				ch <- prometheus.MustNewConstMetric(d, fields[f].kind, v, lv...)
			}
		}
	}
}
