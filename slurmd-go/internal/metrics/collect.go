package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

var (
	jobLabels        = []string{"job_id", "user"}
	descJobAllocSec  = desc("job_gpu_allocated_seconds_total", "GPU-seconds allocated to the job on this node.", jobLabels...)
	descJobUsedSec   = desc("job_gpu_used_seconds_total", "GPU-seconds the job used on this node: GPU utilization × time, summed over its GPUs.", jobLabels...)
	descJobGPUs      = desc("job_gpus_allocated", "GPUs the job holds on this node (0 once it ended, until its series are dropped).", jobLabels...)
	descJobIdle      = desc("job_gpus_idle", "GPUs the job holds on this node that were idle (0 % utilization) at the last sample.", jobLabels...)
	descNodeGPUs     = desc("gpus", "GPUs found at the last sample.")
	descNodeAlloc    = desc("gpus_allocated", "GPUs held by jobs at the last sample.")
	descNodeIdle     = desc("gpus_allocated_idle", "GPUs held by jobs that were idle (0 % utilization) at the last sample.")
	descRegDropped   = desc("metrics_jobs_dropped_total", "Jobs whose steps the job registry did not hold because MaxJobs jobs were held (label cardinality cap).")
	descStepsRunning = desc("steps_running", "Job steps running on this node (their step managers answer).")
	descJobsRunning  = desc("jobs_running", "Jobs with a running step on this node.")
)

// jobCollector exports the per-job GPU accounts and the node's allocation.
type jobCollector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobAllocSec, descJobUsedSec, descJobGPUs, descJobIdle, descNodeGPUs, descNodeAlloc, descNodeIdle, descRegDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; any goroutine.
func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	allocated, idle := 0, 0
	for minor, hs := range m.held {
		if len(hs) == 0 {
			continue
		}
		allocated++
		for _, g := range m.gpus {
			if g.Minor == minor {
				if u, ok := g.Values[GPUUtil]; ok && u == 0 {
					idle++
				}
			}
		}
	}
	for id, a := range m.accounts {
		lv := []string{strconv.FormatUint(uint64(id), 10), a.user}
		ch <- prometheus.MustNewConstMetric(descJobAllocSec, prometheus.CounterValue, a.allocSeconds, lv...)
		ch <- prometheus.MustNewConstMetric(descJobGPUs, prometheus.GaugeValue, float64(a.allocated), lv...)
		if a.measured {
			ch <- prometheus.MustNewConstMetric(descJobUsedSec, prometheus.CounterValue, a.usedSeconds, lv...)
			ch <- prometheus.MustNewConstMetric(descJobIdle, prometheus.GaugeValue, float64(a.idle), lv...)
		}
	}
	if m.sampler != nil {
		ch <- prometheus.MustNewConstMetric(descNodeGPUs, prometheus.GaugeValue, float64(len(m.gpus)))
		ch <- prometheus.MustNewConstMetric(descNodeIdle, prometheus.GaugeValue, float64(idle))
	}
	ch <- prometheus.MustNewConstMetric(descNodeAlloc, prometheus.GaugeValue, float64(allocated))
	if m.Jobs != nil {
		ch <- prometheus.MustNewConstMetric(descRegDropped, prometheus.CounterValue, float64(m.Jobs.Dropped()))
	}
}

// stepCollector exports the running steps and jobs of the last scan.
type stepCollector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (c *stepCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descStepsRunning
	ch <- descJobsRunning
}

// Collect implements prometheus.Collector; any goroutine.
func (c *stepCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stepsKnown {
		return
	}
	jobs := make(map[uint32]bool)
	for _, s := range m.liveSteps {
		jobs[s.JobID] = true
	}
	ch <- prometheus.MustNewConstMetric(descStepsRunning, prometheus.GaugeValue, float64(len(m.liveSteps)))
	ch <- prometheus.MustNewConstMetric(descJobsRunning, prometheus.GaugeValue, float64(len(jobs)))
}

// connCollector exports the RPC server's counters at scrape time.
type connCollector struct {
	src   ConnSource
	descs [10]*prometheus.Desc
}

func newConnCollector(src ConnSource) *connCollector {
	return &connCollector{src: src, descs: [10]*prometheus.Desc{
		desc("connections_open", "RPC connections open."),
		desc("rpc_in_flight", "Requests being served by a worker."),
		desc("rpc_queued", "Complete request frames waiting for a worker."),
		desc("connections_accepted_total", "RPC connections accepted."),
		desc("connections_refused_total", "RPC connections closed at accept (over the connection cap, or shutting down)."),
		desc("rpc_frames_total", "Complete request frames read."),
		desc("rpc_overloaded_total", "Requests dropped because the worker pool and its queue were full."),
		desc("rpc_oversize_total", "Connections closed for a length header over the frame cap."),
		desc("connections_timeouts_total", "Connections closed at their deadline (no full frame, or handler late)."),
		desc("rpc_panics_total", "Requests whose handler panicked (recovered)."),
	}}
}

// Describe implements prometheus.Collector.
func (c *connCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		if d != nil {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector; any goroutine.
func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.ConnStats()
	g := func(i int, v int64) {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, float64(v))
	}
	n := func(i int, v uint64) {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
	g(0, s.Open)
	g(1, s.InFlight)
	g(2, s.Queued)
	n(3, s.Accepted)
	n(4, s.Refused)
	n(5, s.Frames)
	n(6, s.Rejected)
	n(7, s.Oversize)
	n(8, s.Timeouts)
	n(9, s.Panics)
}
