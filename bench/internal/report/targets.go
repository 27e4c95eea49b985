package report

import (
	"fmt"

	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Verdict statuses.
const (
	Met         = "met"
	Missed      = "missed"
	NotMeasured = "not measured yet"
	NoData      = "no data"
)

// Verdict is one of issue 6's targets, judged from the results.
type Verdict struct {
	Target   string // the target as the issue states it
	Measured string // the figures it was judged on
	Status   string
}

const (
	ping   = "REQUEST_PING"
	status = "REQUEST_DAEMON_STATUS"
	// publishedPerConnBytes is the published memory per connection ("< 3 KB").
	publishedPerConnBytes = 3000
	// holdPingLimitMs is the target for a ping during a hold.
	holdPingLimitMs = 50
)

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func judge(ok bool) string {
	if ok {
		return Met
	}
	return Missed
}

// Verdicts judges every target of issue 6 that results can speak to; the others are listed
// as not measured yet.
func Verdicts(r *results.Results) []Verdict {
	var v []Verdict
	top := maxInt(r.Config.VUs)
	g := r.ClosedFor(results.TargetGo, ping, top)
	s := r.ClosedFor(results.TargetStock, ping, top)
	lm := r.ClosedFor(r.AuthLimit(), ping, top)
	ln := r.ClosedFor(results.TargetLimitNone, ping, top)
	vu := fmt.Sprintf("%s VUs of REQUEST_PING, closed loop", thousands(top))
	if g == nil || s == nil {
		v = append(v, Verdict{vu + ": no errors", "", NoData})
	} else {
		v = append(v,
			Verdict{vu + ": no errors",
				fmt.Sprintf("slurmd-go %d errors in %s RPCs %s; stock %d errors %s", g.Stats.ErrorTotal, thousands64(g.Stats.OK), errList(g.Stats.Errors), s.Stats.ErrorTotal, errList(s.Stats.Errors)),
				judge(g.Stats.ErrorTotal == 0)},
			Verdict{vu + ": throughput ≥ 1.5× stock",
				fmt.Sprintf("slurmd-go %.0f/s, stock %.0f/s: %s", g.Stats.Throughput, s.Stats.Throughput, ratio(g.Stats.Throughput, s.Stats.Throughput)),
				judge(g.Stats.Throughput >= 1.5*s.Stats.Throughput)})
		if lm != nil {
			extra := ""
			if ln != nil {
				extra = fmt.Sprintf("; no-auth limit %.0f/s", ln.Stats.Throughput)
			}
			bound := "munge"
			if !r.StackOf().UsesMunged() {
				bound = "auth/slurm"
			}
			v = append(v, Verdict{vu + ": throughput ≥ 80 % of the " + bound + "-bound limit server",
				fmt.Sprintf("slurmd-go %.0f/s, %s limit %.0f/s: %s%s", g.Stats.Throughput, bound, lm.Stats.Throughput,
					pct(g.Stats.Throughput, lm.Stats.Throughput), extra),
				judge(g.Stats.Throughput >= 0.8*lm.Stats.Throughput)})
		}
	}
	topHold := maxInt(r.Config.Holds)
	hg, hs := r.HoldFor(results.TargetGo, topHold), r.HoldFor(results.TargetStock, topHold)
	hl := fmt.Sprintf("%s idle connections held", thousands(topHold))
	if hg == nil || hs == nil {
		v = append(v, Verdict{hl + ": ≤ 3 KB of daemon memory per connection", "", NoData})
	} else {
		v = append(v,
			Verdict{hl + ": ≤ 3 KB of daemon memory per connection",
				fmt.Sprintf("slurmd-go %.2f KiB (%.0f bytes) per held connection (%s held); stock %.2f KiB per held connection (%s held, %d accepted)",
					hg.PerConnKB, hg.PerConnKB*1024, thousands64(hg.Hold.Established), hs.PerConnKB, thousands64(hs.Hold.Established), hs.During.FDsPeak-hs.Baseline.FDsLast),
				judge(hg.PerConnKB*1024 <= publishedPerConnBytes)},
			Verdict{hl + ": a ping during the hold answers within 50 ms",
				fmt.Sprintf("slurmd-go probes: %s, max %.1f ms, %d failed; stock: %s, max %.1f ms, %d failed %s",
					thousands64(hg.Probe.LatencyAll.Count), hg.Probe.LatencyAll.MaxMs, hg.Probe.ErrorTotal,
					thousands64(hs.Probe.LatencyAll.Count), hs.Probe.LatencyAll.MaxMs, hs.Probe.ErrorTotal, errList(hs.Probe.Errors)),
				judge(hg.Probe.ErrorTotal == 0 && hg.Probe.LatencyAll.Count > 0 && hg.Probe.LatencyAll.MaxMs <= holdPingLimitMs)})
	}
	og, ost := r.OpenFor(results.TargetGo), r.OpenFor(results.TargetStock)
	ol := fmt.Sprintf("Open loop at %.0f %% of stock's best rate with %s held: p99 ≤ 1/10 of stock's", 100*r.Config.OpenRateFraction, thousands(r.Config.OpenHeld))
	if og == nil || ost == nil {
		v = append(v, Verdict{ol, "", NoData})
	} else {
		v = append(v, Verdict{ol,
			fmt.Sprintf("%.0f req/s: slurmd-go p99 %.2f ms (%d failed), stock p99 %.2f ms (%d failed %s), failures counted at the time they took: %s",
				og.Rate, og.Stats.LatencyAll.P99Ms, og.Stats.ErrorTotal, ost.Stats.LatencyAll.P99Ms, ost.Stats.ErrorTotal, errList(ost.Stats.Errors),
				ratio(og.Stats.LatencyAll.P99Ms, ost.Stats.LatencyAll.P99Ms)),
			judge(og.Stats.ErrorTotal == 0 && og.Stats.LatencyAll.P99Ms*10 <= ost.Stats.LatencyAll.P99Ms)})
	}
	v = append(v, jobsVerdict(r), srunVerdict(r))
	ig, is := r.IdleFor(results.TargetGo, "start"), r.IdleFor(results.TargetStock, "start")
	if ig == nil || is == nil {
		v = append(v, Verdict{"Idle daemon memory ≤ stock's", "", NoData})
	} else {
		v = append(v, Verdict{"Idle daemon memory ≤ stock's",
			fmt.Sprintf("RSS after registration: slurmd-go %.1f MiB, stock %.1f MiB (%s)%s", mib(ig.Series.RSSMedianKB), mib(is.Series.RSSMedianKB),
				ratio(float64(ig.Series.RSSMedianKB), float64(is.Series.RSSMedianKB)), memSplit(ig.Mem, is.Mem)),
			judge(ig.Series.RSSMedianKB <= is.Series.RSSMedianKB)})
	}
	v = append(v, stepdVerdict(r))
	return v
}

// jobsVerdict judges slurmd-go's job-array throughput against stock's.
func jobsVerdict(r *results.Results) Verdict {
	const target = "Job throughput ≥ stock's"
	g, s := r.JobsFor(results.TargetGo), r.JobsFor(results.TargetStock)
	if g == nil || s == nil || g.Rate <= 0 || s.Rate <= 0 {
		return pending(r, "job-throughput", target)
	}
	m := fmt.Sprintf("%s-task array of `true`: slurmd-go %.1f jobs/s, stock %.1f jobs/s (%s)",
		thousands(g.Tasks), g.Rate, s.Rate, ratio(g.Rate, s.Rate))
	if n := r.JobsFor(results.TargetGoNet); n != nil {
		m += fmt.Sprintf("; slurmd-go net %.1f jobs/s", n.Rate)
	}
	return Verdict{target, m, judge(g.Completed == g.Tasks && g.Rate >= s.Rate)}
}

// srunVerdict judges slurmd-go's median `srun -n1 true` wall time against stock's (the issue's
// target: p50 at most stock's). A failed srun on slurmd-go misses it whatever the median.
func srunVerdict(r *results.Results) Verdict {
	const target = "`srun -n1 true` p50 ≤ stock's"
	g, s := r.SrunFor(results.TargetGo), r.SrunFor(results.TargetStock)
	if g == nil || s == nil || g.OK == 0 || s.OK == 0 {
		return pending(r, "srun-launch", target)
	}
	m := fmt.Sprintf("%s sequential `srun -n1 -N1 -w <node> true`, wall time: slurmd-go p50 %.1f ms, p99 %.1f ms (%d failed); stock p50 %.1f ms, p99 %.1f ms (%d failed): p50 %s, p99 %s",
		thousands(g.Runs), g.P50Ms, g.P99Ms, g.Errors, s.P50Ms, s.P99Ms, s.Errors, ratio(g.P50Ms, s.P50Ms), ratio(g.P99Ms, s.P99Ms))
	if n := r.SrunFor(results.TargetGoNet); n != nil && n.OK > 0 {
		m += fmt.Sprintf("; slurmd-go net p50 %.1f ms", n.P50Ms)
	}
	return Verdict{target, m, judge(g.Errors == 0 && g.P50Ms <= s.P50Ms)}
}

// stepdVerdict judges the idle RSS of slurmd-go's step manager against stock slurmstepd's.
func stepdVerdict(r *results.Results) Verdict {
	const target = "Step-manager memory ≤ stock's"
	g, s := r.StepRSSFor(results.TargetGo), r.StepRSSFor(results.TargetStock)
	if g == nil || s == nil || g.RSSMedianKB <= 0 || s.RSSMedianKB <= 0 {
		return pending(r, "stepd-rss", target)
	}
	return Verdict{target, fmt.Sprintf("VmRSS of a batch job's step manager, idle: slurmd-go %.1f MiB, stock %.1f MiB (%s)%s",
		mib(g.RSSMedianKB), mib(s.RSSMedianKB), ratio(float64(g.RSSMedianKB), float64(s.RSSMedianKB)), memSplit(g.Mem, s.Mem)),
		judge(g.RSSMedianKB <= s.RSSMedianKB)}
}

// pending is the verdict of a target whose scenario (name) has no judge here yet: "not
// measured yet" with the scenario's reason while it is a placeholder; once a scenario really
// measures it, the scenario's own section has the figures and this row says so until a judge
// is added.
func pending(r *results.Results, name, target string) Verdict {
	for _, s := range r.Status {
		if s.Name != name {
			continue
		}
		if s.Status == results.StatusNotMeasured {
			return Verdict{target, s.Note, NotMeasured}
		}
		return Verdict{target, "scenario " + name + ": " + s.Status + " (see its section)", NoData}
	}
	return Verdict{target, "scenario " + name + " did not run", NotMeasured}
}

// memSplit names the anonymous and file-backed parts of both RSS figures ("" without both
// breakdowns).
func memSplit(g, s *procstat.Mem) string {
	if g == nil || s == nil {
		return ""
	}
	return fmt.Sprintf("; anonymous %.1f vs %.1f MiB (%s), file-backed %.1f vs %.1f MiB (%s)",
		mib(g.AnonKB), mib(s.AnonKB), ratio(float64(g.AnonKB), float64(s.AnonKB)),
		mib(g.FileKB), mib(s.FileKB), ratio(float64(g.FileKB), float64(s.FileKB)))
}
