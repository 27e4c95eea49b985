package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Amdahl is the extended Amdahl model S(N) = 1 / ((1 − P) + P/N + IO_wait) fitted to a
// target's closed-loop speedups, with IO_wait measured.
type Amdahl struct {
	Target string
	// IOWait is the share of one request's time spent waiting for munged, measured at 1 VU:
	// munged's serial decode + encode time (munge-rate, concurrency 1) over the target's mean
	// latency at 1 VU. Under auth/slurm it is 0: tokens are checked in-process, no request
	// waits on another process for its authentication.
	IOWait float64
	// P is the parallel fraction fitted (least squares on log speedup) to the measured
	// speedups.
	P      float64
	Points []AmdahlPoint
	// Asymptote is the modelled speedup as N → ∞, and AsymptoteRate the matching rate.
	Asymptote, AsymptoteRate float64
}

// AmdahlPoint is one VU level: the measured and the modelled speedup over 1 VU.
type AmdahlPoint struct {
	N                  int
	Measured, Modelled float64
}

// model is the published formula normalised so that S(1) = 1: the raw formula gives
// 1/(1+IO_wait) at N = 1, while a speedup is relative to one user by definition.
func model(p, w float64, n int) float64 {
	return (1 + w) / ((1 - p) + p/float64(n) + w)
}

// FitAmdahl fits the model for target (nil if the runs it needs are missing).
func FitAmdahl(r *results.Results, target string) *Amdahl {
	one := r.ClosedFor(target, ping, 1)
	if one == nil || one.Stats.Throughput <= 0 || one.Stats.Latency.MeanMs <= 0 {
		return nil
	}
	a := &Amdahl{Target: target}
	switch {
	case !r.StackOf().UsesMunged():
		a.IOWait = 0
	case r.Munge != nil:
		d, e := results.Serial(r.Munge.Decode), results.Serial(r.Munge.Encode)
		if d.MeanMs <= 0 || e.MeanMs <= 0 {
			return nil
		}
		a.IOWait = math.Min(1, (d.MeanMs+e.MeanMs)/one.Stats.Latency.MeanMs)
	default:
		return nil
	}
	for _, v := range r.Config.VUs {
		c := r.ClosedFor(target, ping, v)
		if c == nil || c.Stats.Throughput <= 0 {
			continue
		}
		a.Points = append(a.Points, AmdahlPoint{N: v, Measured: c.Stats.Throughput / one.Stats.Throughput})
	}
	best, bestErr := 0.0, math.Inf(1)
	for i := 0; i <= 100000; i++ {
		p := float64(i) / 100000
		var se float64
		for _, pt := range a.Points {
			diff := math.Log(pt.Measured) - math.Log(model(p, a.IOWait, pt.N))
			se += diff * diff
		}
		if se < bestErr {
			best, bestErr = p, se
		}
	}
	a.P = best
	for i := range a.Points {
		a.Points[i].Modelled = model(a.P, a.IOWait, a.Points[i].N)
	}
	a.Asymptote = (1 + a.IOWait) / ((1 - a.P) + a.IOWait)
	a.AsymptoteRate = a.Asymptote * one.Stats.Throughput
	return a
}

func amdahlSection(r *results.Results, _ string) string {
	var b strings.Builder
	b.WriteString("S(N) = 1 / ((1 − P) + P/N + IO_wait), with N the number of concurrent requests (VUs), normalised to S(1) = 1 " +
		"(as published the formula gives 1/(1 + IO_wait) at N = 1). ")
	if r.StackOf().UsesMunged() {
		b.WriteString("**IO_wait is measured**: munged's serial decode + encode time " +
			"(munge-rate at concurrency 1) over the target's mean ping latency at 1 VU. ")
	} else {
		b.WriteString("**IO_wait is 0** under auth/slurm, by construction rather than by measurement: the token is verified in the daemon's own process " +
			"(token-rate), so no request waits on another process to be authenticated, and the model is Amdahl's law. ")
	}
	b.WriteString("**P is fitted** (least squares on log S) to the measured speedups X(N)/X(1). " +
		"The *modelled* column and the asymptote are the model; everything else is measured.\n\n")
	for _, name := range []string{results.TargetGo, results.TargetStock, r.AuthLimit()} {
		a := FitAmdahl(r, name)
		if a == nil {
			continue
		}
		t := table{head: []string{"N (VUs)", "measured S(N)", "modelled S(N)"}}
		for _, p := range a.Points {
			t.add(thousands(p.N), fmt.Sprintf("%.2f", p.Measured), fmt.Sprintf("%.2f", p.Modelled))
		}
		how := "measured"
		if !r.StackOf().UsesMunged() {
			how = "auth/slurm: no wait"
		}
		fmt.Fprintf(&b, "**%s**: IO_wait = %.2f (%s), P = %.4f (fitted); modelled S(∞) = %.2f, i.e. %.0f RPC/s.\n\n%s\n",
			name, a.IOWait, how, a.P, a.Asymptote, a.AsymptoteRate, t.String())
	}
	if lm := r.ClosedFor(results.TargetLimitSlurm, ping, 1); lm != nil && lm.Limit != nil && lm.Limit.HandleNS > 0 {
		fmt.Fprintf(&b, "Cross-check, measured inside the auth/slurm-bound limit server at 1 VU: %.0f %% of its request handling time is spent verifying the token (%.1f µs per request, CPU in its own process, not a wait).\n",
			100*float64(lm.Limit.DecodeNS)/float64(lm.Limit.HandleNS), float64(lm.Limit.DecodeNS)/float64(max(lm.Limit.Requests, 1))/1e3)
	}
	if lm := r.ClosedFor(results.TargetLimitMunge, ping, 1); lm != nil && lm.Limit != nil && lm.Limit.HandleNS > 0 {
		fmt.Fprintf(&b, "Cross-check, measured inside the munge-bound limit server at 1 VU: %.0f %% of its request handling time is spent in munged (decode %.3f ms + encode %.3f ms per request).\n",
			100*float64(lm.Limit.DecodeNS+lm.Limit.EncodeNS)/float64(lm.Limit.HandleNS),
			float64(lm.Limit.DecodeNS)/float64(max(lm.Limit.Requests, 1))/1e6, float64(lm.Limit.EncodeNS)/float64(max(lm.Limit.Requests, 1))/1e6)
	}
	return b.String()
}
