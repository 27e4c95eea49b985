package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeSampler returns its GPUs, or err.
type fakeSampler struct {
	mu   sync.Mutex
	gpus []GPU
	err  error
}

func (f *fakeSampler) Sample(context.Context) ([]GPU, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gpus, f.err
}

func (f *fakeSampler) setUtil(minor int, u float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.gpus {
		if f.gpus[i].Minor == minor {
			f.gpus[i].Values[GPUUtil] = u
		}
	}
}

type fakeSteps struct{ live []slurmproto.StepID }

func (f *fakeSteps) Steps(context.Context) []slurmproto.StepID { return f.live }

type fakeConns struct{ s ConnStats }

func (f fakeConns) ConnStats() ConnStats { return f.s }

// clock is a settable Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_800_000_000, 0)} }
func h100(index, minor int, util float64) GPU {
	return GPU{Index: index, Minor: minor, UUID: "GPU-" + string(rune('a'+index)), PCIBusID: "00000000:1" + string(rune('0'+index)) + ":00.0",
		ModelName: "NVIDIA H100 80GB HBM3", Values: map[Field]float64{GPUUtil: util, FBUsed: 1024, FBFree: 80000, PowerUsage: 120.5,
			TotalEnergy: 5e6, GPUTemp: 40, XIDErrors: 0}}
}

// series finds the samples of one family whose labels include want.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			out = append(out, m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return -1
}

// one requires exactly one series and returns its value.
func one(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	s := series(t, reg, name, want)
	if len(s) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, want, len(s))
	}
	return value(s[0])
}

func newTest(t *testing.T, o Options) (*Metrics, *clock) {
	t.Helper()
	c := newClock()
	o.Now = c.now
	o.Logger = hclog.NewNullLogger()
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// TestMetrics_GPUSeriesLabelledByHolder: every NVML value is exported under
// its dcgm-exporter name with dcgm-exporter's labels, plus job_id, step and
// user of the job holding the GPU; a free GPU has empty job labels; a value
// NVML did not give has no series.
func TestMetrics_GPUSeriesLabelledByHolder(t *testing.T) {
	s := &fakeSampler{gpus: []GPU{h100(0, 0, 0), h100(1, 3, 87)}}
	delete(s.gpus[0].Values, PowerUsage)
	m, _ := newTest(t, Options{Hostname: "gpu01", Sampler: s})
	m.Jobs.StepStarted(StepStart{JobID: 42, StepID: slurmproto.StepIDBatch, User: "alice", GPUs: []int{3}})
	m.Jobs.StepStarted(StepStart{JobID: 42, StepID: 0, User: "alice", GPUs: []int{3}})
	m.Tick(context.Background())

	got := one(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", map[string]string{"gpu": "1", "device": "nvidia3", "UUID": "GPU-b",
		"pci_bus_id": "00000000:11:00.0", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "gpu01", "job_id": "42", "step": "0", "user": "alice"})
	if got != 87 {
		t.Fatalf("GPU 1 utilization %v, want 87", got)
	}
	if v := one(t, m.Registry, "DCGM_FI_DEV_FB_USED", map[string]string{"gpu": "0", "job_id": "", "step": "", "user": ""}); v != 1024 {
		t.Fatalf("GPU 0 FB used %v", v)
	}
	if n := len(series(t, m.Registry, "DCGM_FI_DEV_POWER_USAGE", nil)); n != 1 {
		t.Fatalf("%d power series, want 1 (GPU 0 has no reading)", n)
	}
	if n := len(series(t, m.Registry, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", nil)); n != 2 {
		t.Fatalf("%d energy series, want 2", n)
	}
	mfs, _ := m.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" && mf.GetType() != dto.MetricType_COUNTER {
			t.Fatalf("energy is a %v, want a counter as dcgm-exporter's", mf.GetType())
		}
	}

	// The job ends: GPU 1's series lose the job labels at the next sample.
	m.Jobs.JobEnded(42)
	m.Tick(context.Background())
	if n := len(series(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", map[string]string{"job_id": "42"})); n != 0 {
		t.Fatalf("%d series still labelled with the ended job", n)
	}
	one(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", map[string]string{"gpu": "1", "job_id": ""})
}

// TestMetrics_JobAccounting: allocated GPU-seconds grow with wall time per
// GPU held, used GPU-seconds with utilization, idle GPUs are counted, and
// a finished job's series stay FinishedJobLinger and are then dropped.
func TestMetrics_JobAccounting(t *testing.T) {
	s := &fakeSampler{gpus: []GPU{h100(0, 0, 0), h100(1, 1, 50), h100(2, 2, 100)}}
	m, c := newTest(t, Options{Hostname: "gpu01", Sampler: s, Linger: time.Minute})
	m.Jobs.StepStarted(StepStart{JobID: 7, StepID: slurmproto.StepIDBatch, User: "bob", GPUs: []int{0, 1}})
	ctx := context.Background()
	m.Tick(ctx)
	c.advance(10 * time.Second)
	m.Tick(ctx)
	c.advance(10 * time.Second)
	s.setUtil(0, 100)
	m.Tick(ctx)

	job := map[string]string{"job_id": "7", "user": "bob"}
	if v := one(t, m.Registry, "slurmd_go_job_gpu_allocated_seconds_total", job); v != 40 {
		t.Fatalf("allocated %v GPU-s, want 2 GPUs × 20 s", v)
	}
	// GPU 0: 0 % then 100 % for 10 s each; GPU 1: 50 % for 20 s.
	if v := one(t, m.Registry, "slurmd_go_job_gpu_used_seconds_total", job); v != 20 {
		t.Fatalf("used %v GPU-s, want 10 + 10", v)
	}
	if v := one(t, m.Registry, "slurmd_go_job_gpus_allocated", job); v != 2 {
		t.Fatalf("allocated %v GPUs", v)
	}
	if v := one(t, m.Registry, "slurmd_go_job_gpus_idle", job); v != 0 {
		t.Fatalf("idle %v GPUs, want 0 at the last sample", v)
	}
	s.setUtil(1, 0)
	m.Tick(ctx)
	if v := one(t, m.Registry, "slurmd_go_job_gpus_idle", job); v != 1 {
		t.Fatalf("idle %v GPUs, want 1", v)
	}
	if v := one(t, m.Registry, "slurmd_go_gpus_allocated_idle", nil); v != 1 {
		t.Fatalf("node idle allocated %v, want 1", v)
	}
	if v := one(t, m.Registry, "slurmd_go_gpus_allocated", nil); v != 2 {
		t.Fatalf("node allocated %v, want 2", v)
	}
	if v := one(t, m.Registry, "slurmd_go_gpus", nil); v != 3 {
		t.Fatalf("node GPUs %v, want 3", v)
	}

	m.Jobs.JobEnded(7)
	c.advance(30 * time.Second)
	m.Tick(ctx)
	if v := one(t, m.Registry, "slurmd_go_job_gpus_allocated", job); v != 0 {
		t.Fatalf("ended job holds %v GPUs", v)
	}
	if v := one(t, m.Registry, "slurmd_go_job_gpu_allocated_seconds_total", job); v != 40 {
		t.Fatalf("ended job's account moved to %v", v)
	}
	c.advance(time.Minute)
	m.Tick(ctx)
	if n := len(series(t, m.Registry, "slurmd_go_job_gpu_allocated_seconds_total", job)); n != 0 {
		t.Fatalf("finished job still has %d series after the linger", n)
	}
}

// TestMetrics_MaxJobs: the per-job series are capped; finished jobs are
// evicted first, and live jobs over the cap are counted, not labelled.
func TestMetrics_MaxJobs(t *testing.T) {
	s := &fakeSampler{gpus: []GPU{h100(0, 0, 10), h100(1, 1, 10), h100(2, 2, 10)}}
	m, _ := newTest(t, Options{Sampler: s, MaxJobs: 2})
	ctx := context.Background()
	for j := uint32(1); j <= 2; j++ {
		m.Jobs.StepStarted(StepStart{JobID: j, StepID: 0, User: "u", GPUs: []int{int(j - 1)}})
	}
	m.Jobs.StepStarted(StepStart{JobID: 3, StepID: 0, User: "u", GPUs: []int{2}})
	if d := m.Jobs.Dropped(); d != 1 {
		t.Fatalf("registry dropped %d jobs, want 1", d)
	}
	m.Tick(ctx)
	if n := len(series(t, m.Registry, "slurmd_go_job_gpus_allocated", nil)); n != 2 {
		t.Fatalf("%d job series, want the cap 2", n)
	}
	// Job 1 ends; job 3 comes back: it evicts the finished job 1.
	m.Jobs.JobEnded(1)
	m.Tick(ctx)
	m.Jobs.StepStarted(StepStart{JobID: 3, StepID: 0, User: "u", GPUs: []int{2}})
	m.Tick(ctx)
	if n := len(series(t, m.Registry, "slurmd_go_job_gpus_allocated", map[string]string{"job_id": "3"})); n != 1 {
		t.Fatal("job 3 not accounted after job 1 ended")
	}
	if n := len(series(t, m.Registry, "slurmd_go_job_gpus_allocated", nil)); n != 2 {
		t.Fatalf("%d job series, want the cap 2", n)
	}
	// A third live job on a full table of live ones is counted only.
	m2, _ := newTest(t, Options{Sampler: s, MaxJobs: 1, Holders: staticHolders{0: {{JobID: 1}}, 1: {{JobID: 2}}}})
	m2.Tick(ctx)
	if v := one(t, m2.Registry, "slurmd_go_metrics_jobs_unaccounted", nil); v != 1 {
		t.Fatalf("unaccounted %v, want 1", v)
	}
	if n := len(series(t, m2.Registry, "slurmd_go_job_gpus_allocated", nil)); n != 1 {
		t.Fatalf("%d job series, want 1", n)
	}
}

type staticHolders map[int][]Holder

func (s staticHolders) Holders() map[int][]Holder { return s }

// TestMetrics_SharedGPU: a GPU two jobs hold (shards) has one series per
// job, and its use is split between them.
func TestMetrics_SharedGPU(t *testing.T) {
	s := &fakeSampler{gpus: []GPU{h100(0, 0, 80)}}
	m, c := newTest(t, Options{Sampler: s})
	m.Jobs.StepStarted(StepStart{JobID: 5, StepID: 0, User: "a", GPUs: []int{0}})
	m.Jobs.StepStarted(StepStart{JobID: 6, StepID: 1, User: "b", GPUs: []int{0}})
	m.Tick(context.Background())
	c.advance(10 * time.Second)
	m.Tick(context.Background())
	if n := len(series(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", nil)); n != 2 {
		t.Fatalf("%d series for the shared GPU, want one per job", n)
	}
	one(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", map[string]string{"job_id": "6", "step": "1", "user": "b"})
	if v := one(t, m.Registry, "slurmd_go_job_gpu_used_seconds_total", map[string]string{"job_id": "5"}); v != 4 {
		t.Fatalf("job 5 used %v GPU-s, want 10 s × 80 %% / 2", v)
	}
}

// TestMetrics_SampleError: a failed sample is counted and leaves no stale
// GPU series behind.
func TestMetrics_SampleError(t *testing.T) {
	s := &fakeSampler{gpus: []GPU{h100(0, 0, 10)}}
	m, _ := newTest(t, Options{Sampler: s})
	m.Tick(context.Background())
	one(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", nil)
	s.err = errors.New("nvml: ERROR_GPU_IS_LOST")
	m.Tick(context.Background())
	if n := len(series(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", nil)); n != 0 {
		t.Fatalf("%d GPU series after a failed sample", n)
	}
	if v := one(t, m.Registry, "slurmd_go_gpu_sample_errors_total", nil); v != 1 {
		t.Fatalf("sample errors %v", v)
	}
}

// TestMetrics_NoGPUs: a node without NVML exports the daemon's series and
// no GPU ones.
func TestMetrics_NoGPUs(t *testing.T) {
	steps := &fakeSteps{live: []slurmproto.StepID{{JobID: 9, StepID: slurmproto.StepIDBatch}, {JobID: 9, StepID: 0}, {JobID: 10, StepID: slurmproto.StepIDExtern}}}
	m, _ := newTest(t, Options{Steps: steps, Conns: fakeConns{ConnStats{Open: 3, Accepted: 17, Rejected: 2}}})
	m.Tick(context.Background())
	if n := len(series(t, m.Registry, "DCGM_FI_DEV_GPU_UTIL", nil)); n != 0 {
		t.Fatalf("%d GPU series without a sampler", n)
	}
	if n := len(series(t, m.Registry, "slurmd_go_gpus", nil)); n != 0 {
		t.Fatal("a GPU count without a sampler")
	}
	for name, want := range map[string]float64{
		"slurmd_go_steps_running": 3, "slurmd_go_jobs_running": 2, "slurmd_go_connections_open": 3,
		"slurmd_go_connections_accepted_total": 17, "slurmd_go_rpc_overloaded_total": 2,
	} {
		if v := one(t, m.Registry, name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// TestRegistry_Prune: a step the node no longer lists is forgotten once
// past PruneGrace; one that has just started is kept.
func TestRegistry_Prune(t *testing.T) {
	c := newClock()
	r := NewRegistry(0)
	r.now = c.now
	r.StepStarted(StepStart{JobID: 1, StepID: 0, GPUs: []int{0}})
	c.advance(PruneGrace + time.Second)
	r.StepStarted(StepStart{JobID: 2, StepID: 0, GPUs: []int{1}})
	r.StepStarted(StepStart{JobID: 3, StepID: slurmproto.StepIDBatch, GPUs: []int{2}})
	// Job 1 is not listed and older than the grace; job 2 is not listed but
	// young; job 3 is listed.
	r.Prune([]slurmproto.StepID{{JobID: 3, StepID: slurmproto.StepIDBatch}})
	h := r.Holders()
	if len(h[0]) != 0 {
		t.Fatalf("GPU 0 still held by %v after its step ended", h[0])
	}
	if len(h[1]) != 1 || h[1][0].JobID != 2 {
		t.Fatalf("GPU 1 holders %v: a step younger than PruneGrace was pruned", h[1])
	}
	if len(h[2]) != 1 || h[2][0].Step != "batch" {
		t.Fatalf("GPU 2 holders %v", h[2])
	}
}

// TestRPC_Labels: requests are counted by release name and result; a type
// no release defines shares one label.
func TestRPC_Labels(t *testing.T) {
	m, _ := newTest(t, Options{})
	m.RPC.ObserveRPC(rpc.Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: rpc.ResultOK, Elapsed: 3 * time.Millisecond})
	m.RPC.ObserveRPC(rpc.Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: rpc.ResultOK, Elapsed: 2 * time.Second})
	for i := 0; i < 50; i++ {
		m.RPC.ObserveRPC(rpc.Observation{Version: slurmproto.Version2205, MsgType: slurmproto.MsgType(60000 + i), Result: rpc.ResultUnsupported})
	}
	m.RPC.ObserveRPC(rpc.Observation{Result: rpc.ResultMalformed})
	if v := one(t, m.Registry, "slurmd_go_rpc_requests_total", map[string]string{"msg_type": "REQUEST_PING", "result": "ok"}); v != 2 {
		t.Fatalf("pings %v", v)
	}
	if v := one(t, m.Registry, "slurmd_go_rpc_requests_total", map[string]string{"msg_type": "other", "result": "unsupported"}); v != 50 {
		t.Fatalf("unknown types %v", v)
	}
	one(t, m.Registry, "slurmd_go_rpc_requests_total", map[string]string{"msg_type": "none", "result": "malformed"})
	h := series(t, m.Registry, "slurmd_go_rpc_duration_seconds", map[string]string{"msg_type": "REQUEST_PING"})
	if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 2 {
		t.Fatalf("ping latency histogram %v", h)
	}
	if s := h[0].GetHistogram().GetSampleSum(); s < 2.003-1e-9 || s > 2.003+1e-9 {
		t.Fatalf("latency sum %v, want 2.003", s)
	}
}

// TestServer: /metrics serves the registry in Prometheus's text format,
// handlers added before Start are served beside it, and Shutdown stops it.
func TestServer(t *testing.T) {
	m, _ := newTest(t, Options{})
	m.RPC.ObserveRPC(rpc.Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: rpc.ResultOK})
	s := NewServer("127.0.0.1:0", m.Registry, hclog.NewNullLogger())
	s.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(b)
	}
	if body := get("/metrics"); !strings.Contains(body, `slurmd_go_rpc_requests_total{msg_type="REQUEST_PING",result="ok"} 1`) {
		t.Fatalf("/metrics lacks the ping counter:\n%s", body)
	}
	if body := get("/healthz"); body != "ok" {
		t.Fatalf("/healthz %q", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Fatal("served after Shutdown")
	}
}

// TestServer_AddressInUse: a second server on a bound address fails at Start.
func TestServer_AddressInUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewServer("127.0.0.1:0", reg, hclog.NewNullLogger())
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	b := NewServer(a.Addr().String(), reg, hclog.NewNullLogger())
	if err := b.Start(); err == nil || !strings.Contains(err.Error(), a.Addr().String()) {
		t.Fatalf("second Start: %v, want an error naming the address", err)
	}
}

func TestResolveAddr(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"", "", ""},
		{"on", "127.0.0.1:9818", ""},
		{"9818", "127.0.0.1:9818", ""},
		{"28123", "127.0.0.1:28123", ""},
		{"0.0.0.0", "0.0.0.0:9818", ""},
		{"[::1]", "[::1]:9818", ""},
		{":9818", ":9818", ""},
		{"10.1.2.3:9100", "10.1.2.3:9100", ""},
		{"[::]:9818", "[::]:9818", ""},
		{"70000", "", "out of range"},
		{"host:port", "", "bad port"},
		{"a:b:c", "", "too many colons"},
	} {
		got, err := ResolveAddr(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ResolveAddr(%q) = %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ResolveAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestMetrics_XID: a GPU's DCGM_FI_DEV_XID_ERRORS is 0 until an XID is
// reported for it, then that XID, as dcgm-exporter reports it.
func TestMetrics_XID(t *testing.T) {
	a, b := h100(0, 0, 10), h100(1, 1, 10)
	delete(a.Values, XIDErrors)
	delete(b.Values, XIDErrors)
	m, _ := newTest(t, Options{Sampler: &fakeSampler{gpus: []GPU{a, b}}})
	m.Tick(context.Background())
	if v := one(t, m.Registry, "DCGM_FI_DEV_XID_ERRORS", map[string]string{"gpu": "1"}); v != 0 {
		t.Fatalf("XID %v before any event", v)
	}
	m.ObserveXID(1, 79)
	if v := one(t, m.Registry, "DCGM_FI_DEV_XID_ERRORS", map[string]string{"gpu": "1"}); v != 79 {
		t.Fatalf("XID %v, want 79", v)
	}
	if v := one(t, m.Registry, "DCGM_FI_DEV_XID_ERRORS", map[string]string{"gpu": "0"}); v != 0 {
		t.Fatalf("GPU 0 XID %v, want 0", v)
	}
}
