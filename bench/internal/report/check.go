package report

import (
	"fmt"
	"slices"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Check lists what makes a run unusable: a scenario that failed, a run that produced no
// numbers, a protocol error (the daemon answered something a Slurm client rejects). It
// asserts nothing about speed.
func Check(r *results.Results) []string {
	var p []string
	for _, s := range r.Status {
		if s.Status == results.StatusFailed {
			p = append(p, fmt.Sprintf("scenario %s failed: %s", s.Name, s.Note))
		}
	}
	// A partial run (benchrun -only) is asked only for its own scenarios' figures.
	want := func(name string) bool { return len(r.Config.Only) == 0 || slices.Contains(r.Config.Only, name) }
	switch {
	case r.StackOf().UsesMunged():
		if want("munge-rate") && (r.Munge == nil || len(r.Munge.Decode) == 0 || results.Best(r.Munge.Decode).Rate <= 0) {
			p = append(p, "munge-rate: no munged decode rate")
		}
	case want("token-rate") && (r.Tokens == nil || len(r.Tokens.Decode) == 0 || results.Best(r.Tokens.Decode).Rate <= 0):
		p = append(p, "token-rate: no auth/slurm token verify rate")
	}
	for _, t := range r.Targets {
		for _, when := range []string{"start", "after-load"} {
			if i := r.IdleFor(t.Name, when); want("idle-"+when) && (i == nil || i.Series.RSSMedianKB <= 0) {
				p = append(p, fmt.Sprintf("idle-%s: no RSS for %s", when, t.Name))
			}
		}
		for _, v := range r.Config.VUs {
			if !want("ping-closed") {
				break
			}
			c := r.ClosedFor(t.Name, "REQUEST_PING", v)
			switch {
			case c == nil:
				p = append(p, fmt.Sprintf("ping-closed: no run for %s vus=%d", t.Name, v))
			case c.Stats.OK == 0 || c.Stats.Throughput <= 0 || c.Stats.Latency.P50Ms <= 0:
				p = append(p, fmt.Sprintf("ping-closed: %s vus=%d produced no successful RPC (errors %v)", t.Name, v, c.Stats.Errors))
			case c.Stats.Protocol > 0:
				p = append(p, fmt.Sprintf("ping-closed: %s vus=%d: %d protocol errors %v %v", t.Name, v, c.Stats.Protocol, c.Stats.Errors, c.Stats.Samples))
			}
		}
		if t.Kind == results.KindDaemon && want("status-closed") {
			for _, v := range r.Config.StatusVUs {
				c := r.ClosedFor(t.Name, "REQUEST_DAEMON_STATUS", v)
				switch {
				case c == nil:
					p = append(p, fmt.Sprintf("status-closed: no run for %s vus=%d", t.Name, v))
				case c.Stats.OK == 0:
					p = append(p, fmt.Sprintf("status-closed: %s vus=%d produced no successful RPC (errors %v)", t.Name, v, c.Stats.Errors))
				case c.Stats.Protocol > 0:
					p = append(p, fmt.Sprintf("status-closed: %s vus=%d: %d protocol errors %v", t.Name, v, c.Stats.Protocol, c.Stats.Samples))
				}
			}
		}
		for _, n := range r.Config.Holds {
			if !want("hold") {
				break
			}
			h := r.HoldFor(t.Name, n)
			switch {
			case h == nil:
				p = append(p, fmt.Sprintf("hold: no run for %s conns=%d", t.Name, n))
			case h.Hold.Established <= 0 || h.During.Samples == 0:
				p = append(p, fmt.Sprintf("hold: %s conns=%d held nothing", t.Name, n))
			case h.Probe.Protocol > 0:
				p = append(p, fmt.Sprintf("hold: %s conns=%d: %d protocol errors %v", t.Name, n, h.Probe.Protocol, h.Probe.Samples))
			case h.Probe.LatencyAll.Count == 0:
				p = append(p, fmt.Sprintf("hold: %s conns=%d: no probe counted", t.Name, n))
			}
		}
		if t.Kind == results.KindDaemon {
			switch j := r.JobsFor(t.Name); {
			case !want("job-throughput"):
			case j == nil:
				p = append(p, fmt.Sprintf("job-throughput: no run for %s", t.Name))
			case j.Rate <= 0 || j.Completed != j.Tasks:
				p = append(p, fmt.Sprintf("job-throughput: %s: %d of %d tasks COMPLETED (%v)", t.Name, j.Completed, j.Tasks, j.States))
			}
			if sr := r.StepRSSFor(t.Name); want("stepd-rss") && (sr == nil || sr.RSSMedianKB <= 0) {
				p = append(p, fmt.Sprintf("stepd-rss: no step-manager RSS for %s", t.Name))
			}
			switch s := r.SrunFor(t.Name); {
			case !want("srun-launch"):
			case s == nil:
				p = append(p, fmt.Sprintf("srun-launch: no run for %s", t.Name))
			case s.OK == 0 || s.OK != s.Runs || s.Errors > 0 || s.P50Ms <= 0 || s.P99Ms <= 0:
				p = append(p, fmt.Sprintf("srun-launch: %s: %d of %d sruns ok, %d failed %v", t.Name, s.OK, s.Runs, s.Errors, s.ErrorText))
			}
		}
		if want("mpi-startup") && r.Ran("mpi-startup") && (t.Name == results.TargetStock || t.Name == results.TargetGo) {
			switch m := r.MPIFor(t.Name); {
			case m == nil:
				p = append(p, fmt.Sprintf("mpi-startup: no run for %s", t.Name))
			case m.OK == 0 || m.OK != m.Runs || m.Errors > 0 || m.Startup.P50 <= 0 || m.Wall.P50 <= 0:
				p = append(p, fmt.Sprintf("mpi-startup: %s: %d of %d MPI jobs ok, %d failed %v", t.Name, m.OK, m.Runs, m.Errors, m.ErrorText))
			}
		}
		o := r.OpenFor(t.Name)
		switch {
		case !want("open-loop"):
		case o == nil:
			p = append(p, fmt.Sprintf("open-loop: no run for %s", t.Name))
		case o.Stats.LatencyAll.Count == 0:
			p = append(p, fmt.Sprintf("open-loop: %s counted no request", t.Name))
		case o.Stats.Protocol > 0:
			p = append(p, fmt.Sprintf("open-loop: %s: %d protocol errors %v", t.Name, o.Stats.Protocol, o.Stats.Samples))
		}
	}
	return p
}
