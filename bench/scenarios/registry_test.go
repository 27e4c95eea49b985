package scenarios

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

func TestRegistry_NamesUniqueAndPlannedSayNotMeasured(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Registry {
		if s.Name() == "" || s.Title() == "" || seen[s.Name()] {
			t.Fatalf("scenario %q: empty or duplicate name/title", s.Name())
		}
		seen[s.Name()] = true
		if p, ok := s.(planned); ok {
			if err := p.Run(nil); !errors.Is(err, ErrNotMeasuredYet) {
				t.Fatalf("%s: %v, want ErrNotMeasuredYet", p.Name(), err)
			}
		}
	}
	for _, want := range []string{"ping-closed", "hold", "open-loop", "job-throughput", "srun-launch", "stepd-rss"} {
		if !seen[want] {
			t.Errorf("scenario %s missing from Registry", want)
		}
	}
}

// srun-launch is a real scenario now (slurmd-go runs srun steps), between the job array and
// the step-manager memory, like every job scenario after the RPC sweeps.
func TestRegistry_SrunLaunchMeasures(t *testing.T) {
	pos := map[string]int{}
	for i, s := range Registry {
		pos[s.Name()] = i
		if s.Name() == "srun-launch" {
			if _, ok := s.(planned); ok {
				t.Fatal("srun-launch is still a placeholder")
			}
		}
	}
	if !(pos["idle-after-load"] < pos["job-throughput"] && pos["job-throughput"] < pos["srun-launch"] && pos["srun-launch"] < pos["stepd-rss"]) {
		t.Fatalf("registry order %v", pos)
	}
	// Without a daemon to aim at it fails: it is never "not measured yet".
	env := &Env{Ctx: context.Background(), Profile: Smoke(), Res: &results.Results{}, Logf: func(string, ...any) {}}
	RunAll(env, map[string]bool{"srun-launch": true})
	if len(env.Res.Status) != 1 || env.Res.Status[0].Status != results.StatusFailed || len(env.Res.Srun) != 0 {
		t.Fatalf("srun-launch without daemons: %+v %+v", env.Res.Status, env.Res.Srun)
	}
}

func TestSummarizeSrun(t *testing.T) {
	r := &results.SrunLaunch{Runs: 100}
	for i := 100; i >= 1; i-- { // 100 … 1 ms, out of order on purpose
		r.Ms = append(r.Ms, float64(i))
	}
	summarizeSrun(r)
	if r.OK != 100 || r.P50Ms != 50 || r.P99Ms != 99 || r.MinMs != 1 || r.MaxMs != 100 || r.MeanMs != 50.5 {
		t.Fatalf("100 runs: %+v", r)
	}
	if r.Ms[0] != 100 {
		t.Fatal("summarizeSrun reordered the recorded latencies")
	}
	r = &results.SrunLaunch{Runs: 10, Ms: []float64{5, 1, 9, 3, 7, 2, 8, 4, 6, 10}}
	summarizeSrun(r)
	if r.P50Ms != 5 || r.P99Ms != 10 {
		t.Fatalf("10 runs: p50 %v p99 %v, want 5 and 10 (nearest rank)", r.P50Ms, r.P99Ms)
	}
	r = &results.SrunLaunch{Runs: 3}
	summarizeSrun(r)
	if r.OK != 0 || r.P50Ms != 0 {
		t.Fatalf("no successful run: %+v", r)
	}
	if got := nearestRank([]float64{42}, 99); got != 42 {
		t.Fatalf("one value: %v", got)
	}
}

func TestRunAll_RecordsStatuses(t *testing.T) {
	// No placeholder is left in Registry; a stand-in one shows how RunAll records it.
	defer func(saved []Scenario) { Registry = saved }(Registry)
	Registry = append([]Scenario{planned{name: "later", title: "A later scenario", needs: "its subject"}}, Registry...)
	env := &Env{Ctx: context.Background(), Res: &results.Results{}, Logf: func(string, ...any) {}}
	RunAll(env, map[string]bool{"later": true})
	if len(env.Res.Status) != 1 {
		t.Fatalf("statuses %+v", env.Res.Status)
	}
	for _, s := range env.Res.Status {
		if s.Status != results.StatusNotMeasured || s.Note == "" {
			t.Fatalf("status %+v", s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env = &Env{Ctx: ctx, Res: &results.Results{}, Logf: func(string, ...any) {}}
	RunAll(env, map[string]bool{"stepd-rss": true})
	if len(env.Res.Status) != 1 || env.Res.Status[0].Status != results.StatusFailed {
		t.Fatalf("interrupted run: %+v", env.Res.Status)
	}
}

func TestProfiles(t *testing.T) {
	for _, p := range []Profile{Full(), Smoke()} {
		if len(p.VUs) == 0 || len(p.Holds) == 0 || p.Duration <= 0 || p.OpenHeld <= 0 || p.OpenRateFraction <= 0 ||
			p.JobArray <= 0 || p.JobArrayTimeout <= 0 || p.StepSleep <= 0 || p.StepSamples <= 0 || p.SrunRuns <= 0 {
			t.Fatalf("profile %s incomplete: %+v", p.Name, p)
		}
	}
	f := Full()
	// The job array is 200 tasks, not issue 6's 1,000: slurmctld starts about
	// one task per core per second on the 2-core reference machine, and three
	// 1,000-task arrays would break the 15-minute budget of make bench.
	if maxOf(f.VUs) != 5000 || maxOf(f.Holds) != 5000 || f.OpenHeld != 1000 || f.JobArray != 1000 || f.SrunRuns != 100 {
		t.Fatalf("full profile does not match issue 6: %+v", f)
	}
	if s := Smoke(); s.SrunRuns > 20 {
		t.Fatalf("smoke profile runs %d sruns per daemon", s.SrunRuns)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// munge-rate has nothing to measure under auth/slurm, token-rate nothing under munge: each is
// recorded as not applicable with its reason (never failed, never estimated), and measures
// nothing.
func TestRunAll_NotApplicable(t *testing.T) {
	for _, c := range []struct {
		stack launch.Stack
		name  string
		why   string
	}{
		{launch.Stack{Release: launch.Release2411, Auth: launch.AuthSlurm}, "munge-rate", "no munged"},
		{launch.DefaultStack, "token-rate", "through munged"},
	} {
		env := &Env{Ctx: context.Background(), Profile: Smoke(), Stack: c.stack, Res: &results.Results{}, Logf: func(string, ...any) {}}
		RunAll(env, map[string]bool{c.name: true})
		if len(env.Res.Status) != 1 || env.Res.Status[0].Status != results.StatusNotApplicable || !strings.Contains(env.Res.Status[0].Note, c.why) {
			t.Fatalf("%s on %s: %+v", c.name, c.stack, env.Res.Status)
		}
		if env.Res.Munge != nil || env.Res.Tokens != nil || len(env.Res.Errors) != 0 {
			t.Fatalf("%s on %s measured something: %+v", c.name, c.stack, env.Res)
		}
	}
}
