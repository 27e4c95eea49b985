package flood

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 µs to 5 min at 3 significant digits (HdrHistogram).
const (
	histMinUS   = 1
	histMaxUS   = int64(5 * time.Minute / time.Microsecond)
	histSigFigs = 3
	histShards  = 16 // VU i records into shard i%histShards: little lock contention; each shard ~300 KB
	maxSamples  = 8  // distinct error messages kept per run
)

// Latency summarises a latency distribution, in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count:  h.TotalCount(),
		MinMs:  ms(h.Min()),
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P90Ms:  ms(h.ValueAtQuantile(90)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

type shard struct {
	mu  sync.Mutex
	ok  *hdrhistogram.Histogram // successful RPCs
	all *hdrhistogram.Histogram // every counted RPC, a failure at the time it took to fail
	_   [32]byte                // keep neighbouring shards' locks off one cache line
}

// Recorder collects the outcomes of one run. Safe for concurrent use.
type Recorder struct {
	shards   [histShards]shard
	counters Counters
	start    time.Time
	timeline []atomic.Int64 // successful completions per second since start

	smu     sync.Mutex        // guards samples
	samples map[string]string // guarded by smu: kind -> first error message
}

// NewRecorder returns a recorder whose timeline starts at start and covers span.
func NewRecorder(start time.Time, span time.Duration) *Recorder {
	r := &Recorder{start: start, timeline: make([]atomic.Int64, int(span/time.Second)+2), samples: map[string]string{}}
	for i := range r.shards {
		r.shards[i].ok = hdrhistogram.New(histMinUS, histMaxUS, histSigFigs)
		r.shards[i].all = hdrhistogram.New(histMinUS, histMaxUS, histSigFigs)
	}
	return r
}

// Record counts one RPC that started at t0 and ended at t1, recording into shard hint.
func (r *Recorder) Record(hint int, t0, t1 time.Time, res Result) {
	r.counters.Add(res.Kind)
	us := max(t1.Sub(t0).Microseconds(), histMinUS)
	us = min(us, histMaxUS)
	s := &r.shards[uint(hint)%histShards]
	s.mu.Lock()
	_ = s.all.RecordValue(us)
	if res.Kind == OK {
		_ = s.ok.RecordValue(us)
	}
	s.mu.Unlock()
	if res.Kind == OK {
		if sec := int(t1.Sub(r.start) / time.Second); sec >= 0 && sec < len(r.timeline) {
			r.timeline[sec].Add(1)
		}
		return
	}
	if res.Err != nil {
		r.smu.Lock()
		if _, ok := r.samples[res.Kind.String()]; !ok && len(r.samples) < maxSamples {
			r.samples[res.Kind.String()] = res.Err.Error()
		}
		r.smu.Unlock()
	}
}

// Counters returns the outcome counters.
func (r *Recorder) Counters() *Counters { return &r.counters }

// OK is the number of successful RPCs recorded so far.
func (r *Recorder) OK() int64 { return r.counters.Get(OK) }

func (r *Recorder) merged() (ok, all *hdrhistogram.Histogram) {
	ok = hdrhistogram.New(histMinUS, histMaxUS, histSigFigs)
	all = hdrhistogram.New(histMinUS, histMaxUS, histSigFigs)
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		ok.Merge(s.ok)
		all.Merge(s.all)
		s.mu.Unlock()
	}
	return ok, all
}

// Stats is what a run measured, from the client's side.
type Stats struct {
	Window     float64           `json:"window_s"`    // measured window
	OK         int64             `json:"ok"`          // successful RPCs in the window
	Throughput float64           `json:"throughput"`  // OK / window, RPC/s
	Latency    Latency           `json:"latency"`     // successful RPCs
	LatencyAll Latency           `json:"latency_all"` // all counted RPCs; failures at the time they took
	Errors     map[string]int64  `json:"errors"`      // by kind
	ErrorTotal int64             `json:"error_total"` //
	Protocol   int64             `json:"protocol_errors"`
	Samples    map[string]string `json:"error_samples,omitempty"`
	Timeline   []int64           `json:"timeline_ok_per_s,omitempty"`
	// Warmup counts the outcomes of RPCs that ended during the warm-up (closed loops): not
	// measured, but a daemon that fails there is seen.
	Warmup map[string]int64   `json:"warmup,omitempty"`
	Extra  map[string]float64 `json:"extra,omitempty"`
}

// Stats summarises the recorder for a measured window of length window.
func (r *Recorder) Stats(window time.Duration) Stats {
	ok, all := r.merged()
	st := Stats{
		Window:     window.Seconds(),
		OK:         r.counters.Get(OK),
		Latency:    summarize(ok),
		LatencyAll: summarize(all),
		Errors:     r.counters.Errors(),
		ErrorTotal: r.counters.ErrorTotal(),
		Protocol:   r.counters.ProtocolErrors(),
	}
	if window > 0 {
		st.Throughput = float64(st.OK) / window.Seconds()
	}
	r.smu.Lock()
	if len(r.samples) > 0 {
		st.Samples = map[string]string{}
		for k, v := range r.samples {
			st.Samples[k] = v
		}
	}
	r.smu.Unlock()
	last := 0
	for i := range r.timeline {
		if r.timeline[i].Load() > 0 {
			last = i + 1
		}
	}
	for i := 0; i < last; i++ {
		st.Timeline = append(st.Timeline, r.timeline[i].Load())
	}
	return st
}

// ErrorKinds lists the error kinds of st sorted by name (for stable output).
func (st Stats) ErrorKinds() []string {
	var ks []string
	for k := range st.Errors {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
