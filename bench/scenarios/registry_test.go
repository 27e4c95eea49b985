package scenarios

import (
	"context"
	"errors"
	"testing"

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

func TestRunAll_RecordsStatuses(t *testing.T) {
	env := &Env{Ctx: context.Background(), Res: &results.Results{}, Logf: func(string, ...any) {}}
	RunAll(env, map[string]bool{"srun-launch": true})
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
			p.JobArray <= 0 || p.JobArrayTimeout <= 0 || p.StepSleep <= 0 || p.StepSamples <= 0 {
			t.Fatalf("profile %s incomplete: %+v", p.Name, p)
		}
	}
	f := Full()
	// The job array is 200 tasks, not issue 6's 1,000: slurmctld starts about
	// one task per core per second on the 2-core reference machine, and three
	// 1,000-task arrays would break the 15-minute budget of make bench.
	if maxOf(f.VUs) != 5000 || maxOf(f.Holds) != 5000 || f.OpenHeld != 1000 || f.JobArray != 200 {
		t.Fatalf("full profile does not match issue 6: %+v", f)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
