package report

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// synthetic is a complete smoke-sized result: throughput scales with speed[target].
func synthetic() *results.Results {
	speed := map[string]float64{results.TargetStock: 1000, results.TargetGo: 2000, results.TargetGoNet: 1500,
		results.TargetLimitMunge: 2200, results.TargetLimitNone: 8000}
	r := &results.Results{
		Schema: results.SchemaVersion, Profile: "smoke", Started: "2026-01-02T03:04:05Z",
		Machine: launch.Machine{CPUModel: "Test CPU", Cores: 2, MemoryMiB: 2048, Kernel: "Linux test"},
		Config:  results.Config{VUs: []int{1, 16}, StatusVUs: []int{1}, Holds: []int{200}, OpenHeld: 200, OpenRateFraction: 0.5},
		Munge: &results.MungeRates{Threads: 2,
			Encode: []results.RatePoint{{Concurrency: 1, Rate: 5000, MeanMs: 0.2}, {Concurrency: 16, Rate: 9000, MeanMs: 1.5}},
			Decode: []results.RatePoint{{Concurrency: 1, Rate: 4000, MeanMs: 0.25}, {Concurrency: 16, Rate: 6000, MeanMs: 2}}},
	}
	for _, n := range []string{results.TargetStock, results.TargetGo, results.TargetGoNet, results.TargetLimitMunge, results.TargetLimitNone} {
		kind := results.KindDaemon
		if strings.HasPrefix(n, "limit") {
			kind = results.KindLimit
		}
		r.Targets = append(r.Targets, results.Target{Name: n, Kind: kind})
		rss := int64(8000)
		if n == results.TargetGo {
			rss = 7000
		}
		for _, w := range []string{"start", "after-load"} {
			r.Idle = append(r.Idle, results.Idle{Target: n, When: w, Series: procstat.Series{Samples: 5, RSSMedianKB: rss}})
		}
		for _, v := range r.Config.VUs {
			x := speed[n] * float64(min(v, 4)) / 2
			ok := int64(x)
			r.Closed = append(r.Closed, results.ClosedRun{Target: n, Msg: ping, VUs: v,
				Stats: flood.Stats{Window: 1, OK: ok, Throughput: x,
					Latency: flood.Latency{Count: ok, MeanMs: 1000 * float64(v) / x, P50Ms: 1000 * float64(v) / x, P99Ms: 3000 * float64(v) / x}},
				CPU: results.CPU{Daemon: 0.5, Munged: 0.3, Client: 0.4, Busy: 1.2, Total: 2}})
		}
		if kind == results.KindDaemon {
			r.Closed = append(r.Closed, results.ClosedRun{Target: n, Msg: status, VUs: 1,
				Stats: flood.Stats{Window: 1, OK: 500, Throughput: 500, Latency: flood.Latency{Count: 500, P50Ms: 2, P99Ms: 4}}})
		}
		perConn := 10.0
		p99 := 20.0
		if n == results.TargetGo {
			perConn, p99 = 1.5, 2
		}
		r.Holds = append(r.Holds, results.HoldRun{Target: n, Conns: 200,
			Hold:     flood.HoldStats{Wanted: 200, Established: 200},
			Baseline: procstat.Series{Samples: 5, RSSMedianKB: 8000}, During: procstat.Series{Samples: 5, RSSMedianKB: 8000 + int64(perConn*200)},
			PerConnKB: perConn, Probe: flood.Stats{OK: 10, LatencyAll: flood.Latency{Count: 10, P50Ms: 1, P99Ms: p99, MaxMs: p99}}})
		if kind == results.KindDaemon {
			r.Jobs = append(r.Jobs, results.JobThroughput{Target: n, Tasks: 20, Completed: 20, Seconds: 20 / (speed[n] / 100),
				Rate: speed[n] / 100, States: map[string]int{"COMPLETED": 20}})
			r.StepMg = append(r.StepMg, results.StepRSS{Target: n, RSSMedianKB: rss / 2, SamplesKB: []int64{rss / 2}})
			p50 := 200000 / speed[n] // stock 200 ms, slurmd-go 100 ms
			r.Srun = append(r.Srun, results.SrunLaunch{Target: n, Node: "b" + n, Runs: 10, OK: 10, TimeoutS: 30,
				Ms: []float64{p50, p50, p50, p50, p50, p50, p50, p50, p50, 2 * p50}, P50Ms: p50, P99Ms: 2 * p50, MinMs: p50, MaxMs: 2 * p50, MeanMs: 1.1 * p50})
			if n != results.TargetGoNet { // mpi-startup: the daemons with 4 nodes
				st := 20 * p50 // stock 4,000 ms, slurmd-go 2,000 ms
				m := results.MPIStartup{Target: n, Partition: "nb" + n, Nodes: []string{"b" + n, "b" + n + "2", "b" + n + "3", "b" + n + "4"},
					Ranks: 8, Runs: 1, OK: 1, TimeoutS: 180, StartupMs: []float64{st}, WallMs: []float64{st + 500}, BarrierMs: []float64{3}}
				m.Startup, m.Wall = results.Summarize(m.StartupMs), results.Summarize(m.WallMs)
				r.MPI = append(r.MPI, m)
			}
		}
		r.Open = append(r.Open, results.OpenRun{Target: n, Rate: 500, Held: 200, Hold: flood.HoldStats{Established: 200},
			Stats: flood.Stats{OK: 500, LatencyAll: flood.Latency{Count: 500, P99Ms: p99}, Latency: flood.Latency{Count: 500, P99Ms: p99}}})
	}
	// Every scenario of a complete run.
	for _, n := range []string{"munge-rate", "idle-start", "hold", "ping-closed", "status-closed", "open-loop", "idle-after-load",
		"job-throughput", "srun-launch", "stepd-rss", "mpi-startup"} {
		r.Status = append(r.Status, results.ScenarioStatus{Name: n, Status: results.StatusMeasured})
	}
	r.Status = append(r.Status, results.ScenarioStatus{Name: "later", Status: results.StatusNotMeasured, Note: "not measured yet: needs its subject"})
	return r
}

func TestCheck_CompleteRunPasses(t *testing.T) {
	if p := Check(synthetic()); len(p) != 0 {
		t.Fatalf("problems in a complete run: %v", p)
	}
}

func TestCheck_Flags(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(r *results.Results)
		want   string
	}{
		{"protocol error", func(r *results.Results) { r.Closed[0].Stats.Protocol = 1 }, "protocol errors"},
		{"no run", func(r *results.Results) { r.Closed = r.Closed[1:] }, "no run for stock vus=1"},
		{"failed scenario", func(r *results.Results) {
			r.Status = append(r.Status, results.ScenarioStatus{Name: "hold", Status: results.StatusFailed, Note: "boom"})
		}, "scenario hold failed"},
		{"empty hold", func(r *results.Results) { r.Holds[0].Hold.Established = 0 }, "held nothing"},
		{"no munge", func(r *results.Results) { r.Munge = nil }, "munge-rate"},
		{"no jobs", func(r *results.Results) { r.Jobs = r.Jobs[1:] }, "job-throughput: no run for stock"},
		{"failed task", func(r *results.Results) { r.Jobs[0].Completed = 19 }, "19 of 20 tasks COMPLETED"},
		{"no stepd", func(r *results.Results) { r.StepMg = nil }, "stepd-rss: no step-manager RSS"},
		{"no srun", func(r *results.Results) { r.Srun = r.Srun[1:] }, "srun-launch: no run for stock"},
		{"failed srun", func(r *results.Results) {
			r.Srun[1].OK, r.Srun[1].Errors, r.Srun[1].ErrorText = 9, 1, []string{"run 3: timeout"}
		}, "srun-launch: slurmd-go: 9 of 10 sruns ok, 1 failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := synthetic()
			c.break_(r)
			p := strings.Join(Check(r), "\n")
			if !strings.Contains(p, c.want) {
				t.Fatalf("problems %q lack %q", p, c.want)
			}
		})
	}
}

func TestVerdicts(t *testing.T) {
	got := map[string]string{}
	for _, v := range Verdicts(synthetic()) {
		got[v.Target] = v.Status
	}
	want := map[string]string{
		"16 VUs of REQUEST_PING, closed loop: no errors":                                         Met,
		"16 VUs of REQUEST_PING, closed loop: throughput ≥ 1.5× stock":                           Met, // 2000 vs 1000
		"16 VUs of REQUEST_PING, closed loop: throughput ≥ 80 % of the munge-bound limit server": Met, // 2000 vs 2200
		"200 idle connections held: ≤ 3 KB of daemon memory per connection":                      Met, // 1.5 KiB
		"200 idle connections held: a ping during the hold answers within 50 ms":                 Met,
		"Open loop at 50 % of stock's best rate with 200 held: p99 ≤ 1/10 of stock's":            Met, // 2 vs 20 ms
		"Job throughput ≥ stock's":                                                               Met, // 20 vs 10 jobs/s
		"Idle daemon memory ≤ stock's":                                                           Met,
		"Step-manager memory ≤ stock's":                                                          Met, // 3500 vs 4000 KiB
		"`srun -n1 true` p50 ≤ stock's":                                                          Met, // 100 vs 200 ms
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q: %q, want %q", k, got[k], w)
		}
	}
	r := synthetic()
	r.ClosedFor(results.TargetGo, ping, 16).Stats.Throughput = 1400
	for _, v := range Verdicts(r) {
		if strings.Contains(v.Target, "1.5× stock") && v.Status != Missed {
			t.Fatalf("1.4× stock judged %s", v.Status)
		}
	}
	srun := func(r *results.Results) Verdict {
		for _, v := range Verdicts(r) {
			if strings.HasPrefix(v.Target, "`srun") {
				return v
			}
		}
		t.Fatal("no srun verdict")
		return Verdict{}
	}
	if v := srun(synthetic()); !strings.Contains(v.Measured, "slurmd-go p50 100.0 ms") || !strings.Contains(v.Measured, "p50 0.50×") {
		t.Fatalf("srun verdict: %+v", v)
	}
	r = synthetic()
	r.SrunFor(results.TargetGo).P50Ms = 201
	if v := srun(r); v.Status != Missed {
		t.Fatalf("p50 201 vs 200 ms judged %s", v.Status)
	}
	r = synthetic()
	r.SrunFor(results.TargetGo).Errors = 1
	if v := srun(r); v.Status != Missed {
		t.Fatalf("a failed srun judged %s", v.Status)
	}
	r = synthetic()
	r.Srun = nil
	for i := range r.Status {
		if r.Status[i].Name == "srun-launch" {
			r.Status[i] = results.ScenarioStatus{Name: "srun-launch", Status: results.StatusNotMeasured, Note: "not measured yet: x"}
		}
	}
	if v := srun(r); v.Status != NotMeasured {
		t.Fatalf("no srun figures judged %s", v.Status)
	}
}

func TestSrunSection(t *testing.T) {
	s := srunSection(synthetic(), "")
	for _, want := range []string{"| stock | bstock | 10 of 10 | 0 | 200.0 | 400.0 |", "| slurmd-go | bslurmd-go | 10 of 10 | 0 | 100.0 | 200.0 |", "| 0.50× | 0.50× |",
		"slurmd-go's median srun takes 0.50× stock's"} {
		if !strings.Contains(s, want) {
			t.Errorf("srun section lacks %q:\n%s", want, s)
		}
	}
	if s := srunSection(&results.Results{}, ""); !strings.Contains(s, "Not measured") {
		t.Fatalf("empty: %s", s)
	}
}

func TestMemBreakdown(t *testing.T) {
	r := synthetic()
	for i := range r.Idle {
		if r.Idle[i].When == "start" && (r.Idle[i].Target == results.TargetGo || r.Idle[i].Target == results.TargetStock) {
			anon := int64(1024)
			if r.Idle[i].Target == results.TargetGo {
				anon = 3072
			}
			r.Idle[i].Mem = &procstat.Mem{RSSKB: anon + 2048, AnonKB: anon, FileKB: 2048, PSSKB: anon + 1024, PrivateKB: anon,
				Files: []procstat.FileRSS{{Path: "/usr/sbin/d", RSSKB: 1536, SizeKB: 4096}, {Path: "/usr/lib/libc.so.6", RSSKB: 512, SizeKB: 2048}}}
		}
	}
	s := idleSection(r, "")
	for _, want := range []string{"| slurmd-go | 5.0 | 3.0 | 2.0 | `d` 1.5 / 4.0, `libc.so.6` 0.5 / 2.0 | 4.0 | 3.0 |", "| stock | 3.0 | 1.0 | 2.0 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("idle section lacks %q:\n%s", want, s)
		}
	}
	for _, v := range Verdicts(r) {
		if v.Target == "Idle daemon memory ≤ stock's" && !strings.Contains(v.Measured, "anonymous 3.0 vs 1.0 MiB (3.00×), file-backed 2.0 vs 2.0 MiB (1.00×)") {
			t.Errorf("verdict: %s", v.Measured)
		}
	}
}

func TestRender_SplicesRFC(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "results", "latest")
	rfc := filepath.Join(dir, "rfc")
	if err := os.MkdirAll(rfc, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "# RFC\n\nprose before\n\n<!-- BEGIN GENERATED results-ping.md -->\nstale table\n<!-- END GENERATED results-ping.md -->\n\nprose after\n"
	if err := os.WriteFile(filepath.Join(rfc, RFCName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := synthetic()
	skipPlots = raceEnabled
	defer func() { skipPlots = false }()
	if err := Write(r, out, rfc); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(rfc, RFCName))
	s := string(b)
	if strings.Contains(s, "stale table") || !strings.Contains(s, "prose before") || !strings.Contains(s, "prose after") ||
		!strings.Contains(s, "| 16 | 2000 | 4000 |") || !strings.Contains(s, "../results/latest/throughput_vs_vus.png") {
		t.Fatalf("spliced RFC:\n%s", s)
	}
	files := []string{"results.json", "results.md"}
	if !raceEnabled {
		files = append(files, "throughput_vs_vus.png", "latency_vs_vus.png", "memory_vs_conns.png", "munge_rate.png")
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, s := range Sections {
		if _, err := os.Stat(filepath.Join(rfc, "results-"+s.Name+".md")); err != nil {
			t.Errorf("fragment %s: %v", s.Name, err)
		}
	}
	back, err := results.Load(filepath.Join(out, "results.json"))
	if err != nil || len(back.Closed) != len(r.Closed) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestSplice(t *testing.T) {
	path := filepath.Join(t.TempDir(), RFCName)
	frags := map[string]string{"results-a.md": "new A\n", "results-b.md": "new B"}
	doc := "x\n<!-- BEGIN GENERATED results-a.md -->\nold\nold\n<!-- END GENERATED results-a.md -->\ny\n" +
		"<!-- BEGIN GENERATED results-b.md -->\n<!-- END GENERATED results-b.md -->\n"
	want := "x\n<!-- BEGIN GENERATED results-a.md -->\nnew A\n<!-- END GENERATED results-a.md -->\ny\n" +
		"<!-- BEGIN GENERATED results-b.md -->\nnew B\n<!-- END GENERATED results-b.md -->\n"
	for i := 0; i < 2; i++ { // idempotent
		if i == 0 {
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := splice(path, frags); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Fatalf("pass %d:\n%s", i, b)
		}
	}
	for _, bad := range []string{
		"<!-- BEGIN GENERATED results-nope.md -->\n<!-- END GENERATED results-nope.md -->\n",
		"<!-- BEGIN GENERATED results-a.md -->\nno end\n",
	} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := splice(path, frags); err == nil {
			t.Fatalf("%q: want an error", bad)
		}
	}
	if err := splice(filepath.Join(t.TempDir(), "absent.md"), frags); err != nil {
		t.Fatalf("absent RFC: %v", err)
	}
}

func TestFitAmdahl(t *testing.T) {
	a := FitAmdahl(synthetic(), results.TargetGo)
	if a == nil || a.IOWait <= 0 || a.IOWait > 1 || a.P < 0 || a.P > 1 || len(a.Points) != 2 || a.Points[0].Modelled != 1 {
		t.Fatalf("fit %+v", a)
	}
}

// A run of `benchrun -only srun-launch` has no closed loop and no munge rates: the log-scale
// plots must still render (empty) rather than panic.
func TestRender_PartialRun(t *testing.T) {
	full := synthetic()
	r := &results.Results{Schema: results.SchemaVersion, Profile: "smoke", Started: full.Started, Machine: full.Machine,
		Targets: full.Targets, Srun: full.Srun, Status: []results.ScenarioStatus{{Name: "srun-launch", Status: results.StatusMeasured}}}
	out := t.TempDir()
	if err := Write(r, out, ""); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil || !strings.Contains(string(b), "## srun steps: launch latency") {
		t.Fatalf("results.md: %v\n%s", err, b)
	}
	for _, f := range []string{"throughput_vs_vus.png", "latency_vs_vus.png", "munge_rate.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// syntheticSlurm is synthetic() as a 24.11/auth-slurm run: limit-slurm instead of
// limit-munge, token rates instead of munged's.
func syntheticSlurm() *results.Results {
	r := synthetic()
	r.Stack = results.Stack{Release: "24.11", Auth: "slurm", Protocol: "0x2A00", Stock: "slurm-wlm 24.11.5", Chroot: "/var/lib/tiee/chroots/24.11", KeyBytes: 1024}
	r.Munge = nil
	r.Tokens = &results.TokenRates{TokenBytes: 332,
		Encode: []results.RatePoint{{Concurrency: 1, Ops: 100, Rate: 90000, MeanMs: 0.011, CallerCPUUS: 10}},
		Decode: []results.RatePoint{{Concurrency: 1, Ops: 100, Rate: 50000, MeanMs: 0.02, CallerCPUUS: 18}}}
	rename := func(s *string) {
		if *s == results.TargetLimitMunge {
			*s = results.TargetLimitSlurm
		}
	}
	for i := range r.Targets {
		rename(&r.Targets[i].Name)
	}
	for i := range r.Closed {
		rename(&r.Closed[i].Target)
		r.Closed[i].CPU.Munged = 0
	}
	for i := range r.Holds {
		rename(&r.Holds[i].Target)
	}
	for i := range r.Idle {
		rename(&r.Idle[i].Target)
	}
	for i := range r.Open {
		rename(&r.Open[i].Target)
	}
	r.Status[0] = results.ScenarioStatus{Name: "munge-rate", Status: results.StatusNotApplicable, Note: "not applicable: no munged"}
	r.Status = append(r.Status, results.ScenarioStatus{Name: "token-rate", Status: results.StatusMeasured})
	return r
}

func TestCheck_AuthSlurm(t *testing.T) {
	r := syntheticSlurm()
	if p := Check(r); len(p) != 0 {
		t.Fatalf("problems in a complete auth/slurm run (munge-rate not applicable): %v", p)
	}
	r.Tokens = nil
	if p := strings.Join(Check(r), "\n"); !strings.Contains(p, "token-rate: no auth/slurm token verify rate") || strings.Contains(p, "munge-rate") {
		t.Fatalf("problems %q", p)
	}
}

// Every fragment of a 24.11 run names its release, stock slurmd and auth type, and the
// sections that assumed munged say what auth/slurm costs instead.
func TestMarkdown_LabelsTheStack(t *testing.T) {
	r := syntheticSlurm()
	md := Markdown(r, "x/results.json")
	for _, want := range []string{
		"# TiEE bench results (smoke; Slurm 24.11, auth/slurm)",
		"_**Slurm 24.11 (stock slurm-wlm 24.11.5), auth/slurm.** Measured",
		"## auth/slurm tokens: what authentication costs",
		"| VUs | stock | slurmd-go | slurmd-go-net | limit-slurm | limit-noauth | slurmd-go / stock | slurmd-go / limit-slurm |",
		"throughput ≥ 80 % of the auth/slurm-bound limit server | **met**",
		"**IO_wait is 0** under auth/slurm",
		"is held to **50000 RPC/s** by that work alone",
		"token_rate.png",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	for _, bad := range []string{"munged µs / RPC", "## munged: the first suspect bottleneck"} {
		if strings.Contains(md, bad) {
			t.Errorf("auth/slurm results.md has %q", bad)
		}
	}
	for _, s := range SectionsFor(r) {
		if f := Fragment(r, s, "x", ""); !strings.HasPrefix(f, "_**Slurm 24.11 (stock slurm-wlm 24.11.5), auth/slurm.**") {
			t.Errorf("fragment %s starts %q", s.Name, f[:60])
		}
	}
	if !strings.Contains(Markdown(synthetic(), "x"), "_**Slurm 22.05 (stock –), auth/munge.** Measured") {
		t.Error("a run older than the stack field is labelled 22.05/munge")
	}
}

func TestProvenance_UnderLoad(t *testing.T) {
	r := synthetic()
	if p := provenance(r, "x"); strings.Contains(p, "under load") {
		t.Fatalf("quiet run labelled: %s", p)
	}
	r.Load = &results.MachineLoad{StartAvg1: 3.2, QuietBelow: 1, Quiet: false}
	if p := provenance(r, "x"); !strings.Contains(p, "**taken under load**: the 1-minute load average was 3.2") {
		t.Fatalf("loaded run: %s", p)
	}
	r.Load = &results.MachineLoad{StartAvg1: 0.2, QuietBelow: 1, Quiet: true}
	r.ClosedFor(results.TargetGo, ping, 16).CPU = results.CPU{Daemon: 0.5, Client: 0.4, Busy: 1.7, Total: 2}
	if p := provenance(r, "x"); !strings.Contains(p, "**taken under load**: other processes took up to 40 % of the cores in a measured window (REQUEST_PING, 16 VUs, slurmd-go") ||
		strings.Contains(p, "load average") {
		t.Fatalf("run that started quiet, then shared the machine: %s", p)
	}
	r.Load = nil
	r.Machine.LoadAvgBefore = "2.50 1.00 0.50 1/100 42"
	if l := r.StartLoad(); l.Quiet || l.StartAvg1 != 2.5 {
		t.Fatalf("load from the machine line: %+v", l)
	}
}

// Rendering one stack refreshes its own blocks and leaves the other stack's and the releases
// block as they were; a block no run renders is an error.
func TestRender_StacksKeepTheirBlocks(t *testing.T) {
	dir := t.TempDir()
	rfc := filepath.Join(dir, "rfc")
	if err := os.MkdirAll(rfc, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "<!-- BEGIN GENERATED results-ping.md -->\nold 22.05\n<!-- END GENERATED results-ping.md -->\n" +
		"<!-- BEGIN GENERATED results-24.11-slurm-ping.md -->\nold 24.11\n<!-- END GENERATED results-24.11-slurm-ping.md -->\n" +
		"<!-- BEGIN GENERATED results-24.11-slurm-tokens.md -->\nold tokens\n<!-- END GENERATED results-24.11-slurm-tokens.md -->\n" +
		"<!-- BEGIN GENERATED results-releases.md -->\nold releases\n<!-- END GENERATED results-releases.md -->\n"
	path := filepath.Join(rfc, RFCName)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	skipPlots = true
	defer func() { skipPlots = false }()
	read := func() string { b, _ := os.ReadFile(path); return string(b) }
	if err := Write(syntheticSlurm(), filepath.Join(dir, "latest-24.11-slurm"), rfc); err != nil {
		t.Fatal(err)
	}
	s := read()
	if !strings.Contains(s, "old 22.05") || strings.Contains(s, "old 24.11") || strings.Contains(s, "old tokens") || !strings.Contains(s, "old releases") ||
		!strings.Contains(s, "| 16 | 2000 | 4000 | 3000 | 4400 |") {
		t.Fatalf("after the 24.11 render:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(rfc, "results-24.11-slurm-tokens.md")); err != nil {
		t.Fatal(err)
	}
	if err := Write(synthetic(), filepath.Join(dir, "latest"), rfc); err != nil {
		t.Fatal(err)
	}
	if s = read(); strings.Contains(s, "old 22.05") || !strings.Contains(s, "auth/slurm.** Measured") || !strings.Contains(s, "old releases") {
		t.Fatalf("after the 22.05 render:\n%s", s)
	}
	if err := RenderReleases([]*results.Results{synthetic(), syntheticSlurm()}, []string{"a/results.json", "b/results.json"}, rfc); err != nil {
		t.Fatal(err)
	}
	if s = read(); strings.Contains(s, "old releases") || !strings.Contains(s, "`a/results.json`, `b/results.json`") {
		t.Fatalf("after the releases render:\n%s", s)
	}
	for _, name := range []string{"results-25.05-slurm-ping.md", "results-24.11-slurm-nope.md", "results-22.05-munge-ping.md"} {
		if knownBlock(name) {
			t.Errorf("%s: known", name)
		}
	}
}

func TestReleases(t *testing.T) {
	slow := syntheticSlurm()
	slow.Load = &results.MachineLoad{StartAvg1: 4, QuietBelow: 1}
	s := Releases([]*results.Results{synthetic(), slow}, []string{"l/results.json", "l-24.11-slurm/results.json"})
	for _, want := range []string{
		"| measured | Slurm 22.05 (stock –), auth/munge (profile smoke, 2026-01-02) | Slurm 24.11 (stock slurm-wlm 24.11.5), auth/slurm (profile smoke, 2026-01-02, **under load**) |",
		"| REQUEST_PING, closed loop, most VUs: slurmd-go vs stock | 4000 vs 2000 RPC/s: **2.00×** (16 VUs) | 4000 vs 2000 RPC/s: **2.00×** (16 VUs) |",
		"1000 vs 500 RPC/s: **2.00×** (1 VU) |",
		"| 91 % of limit-munge (4400 RPC/s) | 91 % of limit-slurm (4400 RPC/s) |",
		"125 vs 250 (+ munged 75 vs 150)",
		"(no auth service)",
		"token: verify 20.0 µs, make 11.0 µs serial",
		"`srun -n1 true`: p50 ms, slurmd-go vs stock | 100.0 vs 200.0: **0.50×** (10 runs)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("releases block lacks %q:\n%s", want, s)
		}
	}
}

func TestCheck_MPI(t *testing.T) {
	r := synthetic()
	r.MPI = r.MPI[:1]
	if p := strings.Join(Check(r), "; "); !strings.Contains(p, "mpi-startup: no run for slurmd-go") {
		t.Fatalf("no slurmd-go MPI run: %q", p)
	}
	r = synthetic()
	g := r.MPIFor(results.TargetGo)
	g.OK, g.Errors, g.ErrorText, g.StartupMs, g.Startup = 0, 1, []string{"run 1: 8 of 8 ranks came up as singletons"}, nil, results.MsStats{}
	if p := strings.Join(Check(r), "; "); !strings.Contains(p, "mpi-startup: slurmd-go: 0 of 1 MPI jobs ok, 1 failed") {
		t.Fatalf("a failed MPI run: %q", p)
	}
	// A run older than the scenario is not asked for its figures.
	r = synthetic()
	r.MPI = nil
	r.Status = slices.DeleteFunc(r.Status, func(s results.ScenarioStatus) bool { return s.Name == "mpi-startup" })
	if p := Check(r); len(p) != 0 {
		t.Fatalf("a run without mpi-startup: %v", p)
	}
}

func TestMPISection(t *testing.T) {
	s := mpiSection(synthetic(), "")
	for _, want := range []string{"`srun -p <its partition> -N4 -n8 -O --mpi=pmi2 -K1 hello` as root, 1 run with no warm-up run", "8 ranks on 2 cores",
		"| stock | bstock,bstock2,bstock3,bstock4 | 8 | 1 of 1 | 0 | 4000 |", "| 1.00× | 1.00× |",
		"slurmd-go's median MPI startup takes 0.50× stock's (2000 vs 4000 ms), its median srun 0.56× (2500 vs 4500 ms)"} {
		if !strings.Contains(s, want) {
			t.Errorf("mpi section lacks %q:\n%s", want, s)
		}
	}
	r := synthetic()
	g := r.MPIFor(results.TargetGo)
	g.OK, g.Errors, g.ErrorText, g.StartupMs, g.Startup = 0, 1, []string{"run 1: 8 of 8 ranks came up as singletons\nhello"}, nil, results.MsStats{}
	g.WallMs, g.Wall, g.BarrierMs = nil, results.MsStats{}, nil
	if s := mpiSection(r, ""); !strings.Contains(s, "- slurmd-go: run 1: 8 of 8 ranks came up as singletons ⏎ hello") || strings.Contains(s, "median MPI startup takes") ||
		!strings.Contains(s, "| 0 of 1 | 1 | – | – | – | – | – | – | – | – | – | – |") {
		t.Errorf("mpi section of a failed slurmd-go run:\n%s", s)
	}
	if s := mpiSection(&results.Results{}, ""); !strings.Contains(s, "Not measured") {
		t.Errorf("empty run: %s", s)
	}
}

// A partial run (benchrun -only) renders its own scenarios' blocks and no other; a complete
// run older than a scenario leaves that scenario's block alone.
func TestRenders(t *testing.T) {
	sec := func(name string) Section {
		for _, s := range Sections {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no section %s", name)
		return Section{}
	}
	full := synthetic()
	for _, n := range []string{"machine", "targets", "ping", "idle", "srun", "mpi", "scenarios"} {
		if !Renders(full, sec(n)) {
			t.Errorf("a complete run does not render %s", n)
		}
	}
	old := synthetic()
	old.MPI = nil
	old.Status = slices.DeleteFunc(old.Status, func(s results.ScenarioStatus) bool { return s.Name == "mpi-startup" })
	if Renders(old, sec("mpi")) || !Renders(old, sec("srun")) || !Renders(old, sec("machine")) {
		t.Error("a run without mpi-startup: wrong sections")
	}
	part := synthetic()
	part.Config.Only = []string{"mpi-startup"}
	part.Status = []results.ScenarioStatus{{Name: "mpi-startup", Status: results.StatusMeasured}}
	for _, s := range Sections {
		if got := Renders(part, s); got != (s.Name == "mpi") {
			t.Errorf("a run of -only mpi-startup: Renders(%s) = %v", s.Name, got)
		}
	}
	dir := t.TempDir()
	rfc := filepath.Join(dir, "rfc")
	if err := os.MkdirAll(rfc, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "<!-- BEGIN GENERATED results-machine.md -->\nold machine\n<!-- END GENERATED results-machine.md -->\n" +
		"<!-- BEGIN GENERATED results-mpi.md -->\nold mpi\n<!-- END GENERATED results-mpi.md -->\n"
	path := filepath.Join(rfc, RFCName)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	skipPlots = true
	defer func() { skipPlots = false }()
	if err := Write(part, filepath.Join(dir, "mpi-startup"), rfc); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if s := string(b); !strings.Contains(s, "old machine") || strings.Contains(s, "old mpi") || !strings.Contains(s, "MPI startup: per daemon") {
		t.Fatalf("after the partial render:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(rfc, "results-machine.md")); !os.IsNotExist(err) {
		t.Fatalf("a partial run wrote the machine fragment (%v)", err)
	}
	if hasPlots(part) || !hasPlots(full) {
		t.Fatal("plots: a run of mpi-startup alone has none, a complete run has them")
	}
	part.Config.Only = append(part.Config.Only, "hold")
	part.Status = append(part.Status, results.ScenarioStatus{Name: "hold", Status: results.StatusMeasured})
	if !hasPlots(part) {
		t.Fatal("a partial run with hold has no plots")
	}
}

// A partial run is checked for its own scenarios only: what it did not run is not missing.
func TestCheck_PartialRun(t *testing.T) {
	full := synthetic()
	r := &results.Results{Schema: results.SchemaVersion, Profile: "smoke", Machine: full.Machine, Targets: full.Targets,
		Config: results.Config{VUs: full.Config.VUs, StatusVUs: full.Config.StatusVUs, Holds: full.Config.Holds, Only: []string{"mpi-startup"}},
		MPI:    full.MPI, Status: []results.ScenarioStatus{{Name: "mpi-startup", Status: results.StatusMeasured}}}
	if p := Check(r); len(p) != 0 {
		t.Fatalf("a run of mpi-startup alone: %v", p)
	}
	r.MPI = r.MPI[:1]
	if p := strings.Join(Check(r), "; "); p != "mpi-startup: no run for slurmd-go" {
		t.Fatalf("a run of mpi-startup alone without slurmd-go's figures: %q", p)
	}
	r.Config.Only = []string{"mpi-startup", "srun-launch"}
	if p := strings.Join(Check(r), "; "); !strings.Contains(p, "srun-launch: no run for stock") || strings.Contains(p, "ping-closed") {
		t.Fatalf("a run of mpi-startup and srun-launch: %q", p)
	}
}
