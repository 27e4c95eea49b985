package daemon

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/jobmgr"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/metrics"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/probes"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpcserver"
)

// newMetrics builds the telemetry when --metrics-addr (or
// TIEE_METRICS_ADDR) asks for it, and hooks it to the dispatcher; nil when
// off. Before the RPC server starts: the dispatcher's Observer is read by
// its workers.
func (d *Daemon) newMetrics(cfg *config.Config, srv rpcserver.Listener) (*metrics.Metrics, string, error) {
	addr, err := metrics.ResolveAddr(cfg.Flags.MetricsAddr)
	if err != nil || addr == "" {
		return nil, "", err
	}
	var sampler metrics.Sampler
	if l, ok := d.gres.detector.(interface{ Provider() gpu.Provider }); ok {
		// The GRES detector's provider: NVML is opened once for both, at
		// the first sample (the Null provider on a node without it).
		sampler = gpuSampler{provider: l.Provider}
	}
	m, err := metrics.New(metrics.Options{
		Hostname: cfg.Hostname,
		Sampler:  sampler,
		Steps:    d.jobs,
		Conns:    connStats{srv},
		Logger:   d.log,
	})
	if err != nil {
		return nil, "", err
	}
	d.disp.Observer = m.RPC
	d.jobs.SetStepWatcher(stepWatcher{m.Jobs})
	return m, addr, nil
}

// stepWatcher feeds the launches to the metrics' job registry.
type stepWatcher struct{ r *metrics.Registry }

func (w stepWatcher) StepLaunched(jobID, stepID uint32, user string, gpus []int) {
	w.r.StepStarted(metrics.StepStart{JobID: jobID, StepID: stepID, User: user, GPUs: gpus})
}

func (w stepWatcher) JobEnded(jobID uint32) { w.r.JobEnded(jobID) }

var _ jobmgr.StepWatcher = stepWatcher{}

// startMetrics serves m and the Kubernetes probes on addr and samples
// until ctx ends.
func (d *Daemon) startMetrics(ctx context.Context, m *metrics.Metrics, addr string, p probes.Handlers) (*metrics.Server, error) {
	s := metrics.NewServer(addr, m.Registry, d.log)
	s.Handle("/livez", http.HandlerFunc(p.Livez))
	s.Handle("/readyz", http.HandlerFunc(p.Readyz))
	if err := s.Start(); err != nil {
		return nil, fmt.Errorf("daemon: unable to serve metrics: %w", err)
	}
	go m.Run(ctx)
	return s, nil
}

// connStats adapts the RPC server's counters.
type connStats struct{ l rpcserver.Listener }

func (c connStats) ConnStats() metrics.ConnStats {
	s := c.l.Stats()
	return metrics.ConnStats{
		Open: s.Open, InFlight: s.InFlight, Queued: s.Queued, Accepted: s.Accepted, Refused: s.Refused,
		Frames: s.Frames, Rejected: s.Rejected, Oversize: s.Oversize, Timeouts: s.Timeouts, Panics: s.Panics,
	}
}

// gpuSampler reads the GPUs for the metrics through internal/gpu.
type gpuSampler struct{ provider func() gpu.Provider }

// Sample implements metrics.Sampler.
func (s gpuSampler) Sample(ctx context.Context) ([]metrics.GPU, error) {
	ss, err := s.provider().Sample(ctx)
	if err != nil {
		return nil, fmt.Errorf("daemon: GPU sample: %w", err)
	}
	out := make([]metrics.GPU, 0, len(ss))
	for _, g := range ss {
		dcgm := g.DCGM()
		v := make(map[metrics.Field]float64, len(dcgm))
		for k, x := range dcgm {
			v[metrics.Field(k)] = x
		}
		out = append(out, metrics.GPU{Index: g.Index, Minor: g.Minor, UUID: g.UUID, PCIBusID: g.PCIBusID, ModelName: g.Name, Values: v})
	}
	return out, nil
}
