package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// namespace prefixes the daemon's own series (the GPU series keep
// dcgm-exporter's names).
const namespace = "slurmd_go"

// Named defaults.
const (
	// DefaultSampleInterval is how often the GPUs and the steps are read.
	DefaultSampleInterval = 10 * time.Second
	// SampleTimeout bounds one sample (NVML over every GPU, the step scan).
	SampleTimeout = 5 * time.Second
	// FinishedJobLinger keeps a finished job's accounts for the scrapes
	// that follow its end, so that its last increments are scraped.
	FinishedJobLinger = 2 * time.Minute
)

// StepLister lists the node's running steps (jobmgr.Manager.Steps).
type StepLister interface {
	Steps(ctx context.Context) []slurmproto.StepID
}

// ConnSource gives the RPC server's counters (rpcserver.Listener.Stats,
// adapted by the daemon).
type ConnSource interface {
	ConnStats() ConnStats
}

// ConnStats are the RPC server's connection and frame counters.
type ConnStats struct {
	Open, InFlight, Queued                                          int64
	Accepted, Refused, Frames, Rejected, Oversize, Timeouts, Panics uint64
}

// Options configure New. Nil sources export nothing of theirs.
type Options struct {
	Hostname string     // label Hostname of the GPU series
	Sampler  Sampler    // the GPUs (nil: a node without NVML)
	Holders  Holders    // which jobs hold each GPU (nil: a new Registry, see Metrics.Jobs)
	Steps    StepLister // the running steps
	Conns    ConnSource // the RPC server's counters
	// SampleInterval (DefaultSampleInterval), MaxJobs (DefaultMaxJobs),
	// Linger (FinishedJobLinger).
	SampleInterval time.Duration
	MaxJobs        int
	Linger         time.Duration
	Now            func() time.Time // clock seam (time.Now)
	Logger         hclog.Logger
}

// Metrics is the daemon's telemetry: its registry, the RPC observer and
// the job registry the launches feed.
type Metrics struct {
	Registry *prometheus.Registry
	RPC      *RPC
	// Jobs is the registry the step launches feed, when Options.Holders
	// was nil (else nil).
	Jobs *Registry

	hostname string
	sampler  Sampler
	holders  Holders
	steps    StepLister
	interval time.Duration
	maxJobs  int
	linger   time.Duration
	now      func() time.Time
	log      hclog.Logger

	sampleErrors prometheus.Counter
	sampleTime   prometheus.Gauge
	unaccounted  prometheus.Gauge

	mu         sync.Mutex          // guards the fields below
	gpus       []GPU               // the last sample
	held       map[int][]Holder    // the holders at the last sample
	accounts   map[uint32]*account // per job, live and lingering
	liveSteps  []slurmproto.StepID // the last step scan (nil before it)
	stepsKnown bool                // a step scan happened
	lastTick   time.Time
	lastXID    map[int]uint64 // by GPU index: the last XID reported (ObserveXID)
}

// account is one job's GPU accounting.
type account struct {
	user         string
	allocSeconds float64 // GPU-seconds allocated
	usedSeconds  float64 // GPU-seconds used (utilization × time)
	allocated    int     // GPUs held at the last sample
	idle         int     // of which idle (0 % utilization) at the last sample
	measured     bool    // a utilization was read for one of its GPUs
	lastSeen     time.Time
	ended        bool
}

// New builds the registry with every collector. Call Run to sample.
func New(o Options) (*Metrics, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = DefaultMaxJobs
	}
	if o.Linger <= 0 {
		o.Linger = FinishedJobLinger
	}
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg, hostname: o.Hostname, sampler: o.Sampler, holders: o.Holders, steps: o.Steps,
		interval: o.SampleInterval, maxJobs: o.MaxJobs, linger: o.Linger, now: o.Now,
		log: o.Logger.Named("metrics"), accounts: make(map[uint32]*account),
	}
	if m.holders == nil {
		m.Jobs = NewRegistry(o.MaxJobs)
		m.Jobs.now = o.Now
		m.holders = m.Jobs
	}
	m.sampleErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "gpu_sample_errors_total",
		Help: "GPU samples that failed (NVML errors)."})
	m.sampleTime = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "gpu_sample_timestamp_seconds",
		Help: "Unix time of the last GPU sample."})
	m.unaccounted = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "metrics_jobs_unaccounted",
		Help: "Jobs holding GPUs at the last sample that have no per-job series because MaxJobs jobs had (label cardinality cap)."})
	m.RPC = newRPC(reg)
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.sampleErrors, m.sampleTime, m.unaccounted,
		newGPUCollector(m), &jobCollector{m: m}, &stepCollector{m: m},
	}
	if o.Conns != nil {
		cs = append(cs, newConnCollector(o.Conns))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// Run samples every SampleInterval until ctx ends; the first sample is
// taken at once.
func (m *Metrics) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		m.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick takes one sample: the GPUs, the steps, and the jobs' accounts. Run
// calls it; tests call it directly. One goroutine at a time.
func (m *Metrics) Tick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, SampleTimeout)
	defer cancel()
	var live []slurmproto.StepID
	if m.steps != nil {
		live = m.steps.Steps(ctx)
		if m.Jobs != nil {
			m.Jobs.Prune(live)
		}
	}
	var gpus []GPU
	if m.sampler != nil {
		var err error
		if gpus, err = m.sampler.Sample(ctx); err != nil {
			m.sampleErrors.Inc()
			m.log.Warn("GPU sample failed", "error", err)
			gpus = nil
		} else {
			m.sampleTime.Set(float64(m.now().UnixNano()) / 1e9)
		}
	}
	held := m.holders.Holders()
	now := m.now()

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.steps != nil {
		m.liveSteps, m.stepsKnown = live, true
	}
	m.gpus, m.held = gpus, held
	dt := 0.0
	if !m.lastTick.IsZero() {
		dt = now.Sub(m.lastTick).Seconds()
	}
	m.lastTick = now
	m.account(now, dt, gpus, held)
}

// account adds dt seconds to the accounts of the jobs holding GPUs and
// drops those finished more than linger ago. Guarded by mu.
func (m *Metrics) account(now time.Time, dt float64, gpus []GPU, held map[int][]Holder) {
	util := make(map[int]float64, len(gpus))
	for _, g := range gpus {
		if v, ok := g.Values[GPUUtil]; ok {
			util[g.Minor] = v
		}
	}
	seen := make(map[uint32]bool)
	skipped := make(map[uint32]bool)
	for _, a := range m.accounts {
		a.allocated, a.idle = 0, 0
	}
	for minor, hs := range held {
		for _, h := range hs {
			a := m.accounts[h.JobID]
			if a == nil {
				if len(m.accounts) >= m.maxJobs && !m.evictOne() {
					skipped[h.JobID] = true
					continue
				}
				a = &account{}
				m.accounts[h.JobID] = a
			}
			seen[h.JobID] = true
			a.user, a.lastSeen, a.ended = h.User, now, false
			a.allocated++
			a.allocSeconds += dt
			if u, ok := util[minor]; ok {
				a.measured = true
				// A shared GPU's use is split among its holders.
				a.usedSeconds += dt * u / 100 / float64(len(hs))
				if u == 0 {
					a.idle++
				}
			}
		}
	}
	m.unaccounted.Set(float64(len(skipped)))
	for id, a := range m.accounts {
		if !seen[id] {
			a.ended = true
			if now.Sub(a.lastSeen) > m.linger {
				delete(m.accounts, id)
			}
		}
	}
}

// evictOne drops the finished job seen longest ago; false if every
// account is a live job. Guarded by mu.
func (m *Metrics) evictOne() bool {
	var oldest uint32
	var at time.Time
	for id, a := range m.accounts {
		if a.ended && (at.IsZero() || a.lastSeen.Before(at)) {
			oldest, at = id, a.lastSeen
		}
	}
	if at.IsZero() {
		return false
	}
	delete(m.accounts, oldest)
	return true
}

// ObserveXID records an XID event of the GPU of NVML index index: the
// value of its DCGM_FI_DEV_XID_ERRORS from now on, unless its sampler
// reads one itself. The GPU health watch calls it. Any goroutine.
func (m *Metrics) ObserveXID(index int, xid uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastXID == nil {
		m.lastXID = make(map[int]uint64)
	}
	m.lastXID[index] = xid
}

// lastSample is the last GPU sample and its holders, each GPU's XID
// filled in as dcgm-exporter reports it (0: none since the start) where
// the sampler gave none; any goroutine.
func (m *Metrics) lastSample() ([]GPU, map[int][]Holder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GPU, len(m.gpus))
	for i, g := range m.gpus {
		if _, ok := g.Values[XIDErrors]; !ok {
			v := make(map[Field]float64, len(g.Values)+1)
			for f, x := range g.Values {
				v[f] = x
			}
			v[XIDErrors] = float64(m.lastXID[g.Index])
			g.Values = v
		}
		out[i] = g
	}
	return out, m.held
}
