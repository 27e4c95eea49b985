package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Named limits of srun-launch.
const (
	// srunTimeout bounds one srun, start to exit. A step of `true` takes well under a second
	// on either daemon; a run that reaches this is a hang, not a slow launch.
	srunTimeout = 30 * time.Second
	// srunGiveUp is how many failed runs end a daemon's series early (a daemon that cannot
	// launch steps would otherwise cost Runs × srunTimeout).
	srunGiveUp = 5
	// srunErrorSamples is how many failures are kept verbatim in results.json.
	srunErrorSamples = 5
)

// srunLaunch runs, per daemon, `srun -n1 -N1 -w <node> true` SrunRuns times one after
// another (after one untimed warm-up run) and records the wall time of every srun command:
// allocation by slurmctld, the launch RPC to the node daemon, the step manager, the task, the
// step's and the job's completion. Daemons run one after another.
type srunLaunch struct{}

func (srunLaunch) Name() string { return "srun-launch" }
func (srunLaunch) Title() string {
	return "Step launch latency: `srun -n1 -N1 -w <node> true`, one after another, p50/p99 (100 runs in the full profile)"
}

func (srunLaunch) Run(env *Env) error {
	return eachDaemon(env, func(t *Target) error {
		r, err := env.srunLatency(t)
		if r != nil {
			env.Res.Srun = append(env.Res.Srun, *r)
		}
		return err
	})
}

func (e *Env) srunLatency(t *Target) (*results.SrunLaunch, error) {
	n := e.Profile.SrunRuns
	if n <= 0 {
		return nil, fmt.Errorf("profile %s: no srun runs", e.Profile.Name)
	}
	part := e.Cluster.Partition(t.Node)
	name := "bench-srun-" + t.Node
	args := []string{"-p", part, "-w", t.Node, "-N1", "-n1", "-J", name, "true"}
	r := &results.SrunLaunch{Target: t.Name, Node: t.Node, Partition: part, Command: "srun " + strings.Join(args, " "),
		Runs: n, TimeoutS: srunTimeout.Seconds()}
	ms, err := e.srunOnce(name, part, args)
	if err != nil {
		return nil, fmt.Errorf("warm-up %s: %v", r.Command, err)
	}
	r.WarmupMs = ms
	t0 := time.Now()
	for i := 0; i < n && r.Errors < srunGiveUp; i++ {
		if err := e.Ctx.Err(); err != nil {
			return nil, err
		}
		ms, err := e.srunOnce(name, part, args)
		if err != nil {
			r.Errors++
			r.FailedMs = append(r.FailedMs, ms)
			if len(r.ErrorText) < srunErrorSamples {
				r.ErrorText = append(r.ErrorText, fmt.Sprintf("run %d: %v", i+1, err))
			}
			continue
		}
		r.Ms = append(r.Ms, ms)
	}
	r.Seconds = time.Since(t0).Seconds()
	summarizeSrun(r)
	e.Logf("  %s: %d of %d sruns ok in %.1fs: p50 %.1f ms, p99 %.1f ms, min %.1f, max %.1f (warm-up %.1f ms), %d failed",
		t.Name, r.OK, n, r.Seconds, r.P50Ms, r.P99Ms, r.MinMs, r.MaxMs, r.WarmupMs, r.Errors)
	if r.Errors > 0 {
		return r, fmt.Errorf("%s: %d of %d runs failed, %d not run (first: %s; see %s)",
			r.Command, r.Errors, n, n-r.OK-r.Errors, r.ErrorText[0], e.Cluster.Dir)
	}
	return r, nil
}

// srunOnce runs srun args once, bounded by srunTimeout, and returns its wall time in ms. A
// run that fails cancels whatever is left of its job (named name, in partition part).
func (e *Env) srunOnce(name, part string, args []string) (float64, error) {
	t0 := time.Now()
	out, err := e.Cluster.RunFor(e.Ctx, srunTimeout, "srun", args...)
	ms := float64(time.Since(t0)) / float64(time.Millisecond)
	if err != nil {
		_, _ = e.Cluster.Run(e.Ctx, "scancel", "-n", name, "-p", part)
		return ms, fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
	}
	return ms, nil
}

// summarizeSrun fills r's statistics from its successful runs.
func summarizeSrun(r *results.SrunLaunch) {
	r.OK = len(r.Ms)
	if r.OK == 0 {
		return
	}
	s := slices.Clone(r.Ms)
	slices.Sort(s)
	r.P50Ms, r.P99Ms = nearestRank(s, 50), nearestRank(s, 99)
	r.MinMs, r.MaxMs = s[0], s[len(s)-1]
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	r.MeanMs = sum / float64(len(s))
}

// nearestRank is results.NearestRank.
func nearestRank(sorted []float64, p float64) float64 { return results.NearestRank(sorted, p) }
