package report

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

const (
	plotW = 8 * vg.Inch
	plotH = 5 * vg.Inch
)

// subtitle labels every plot with the run's stack, machine and date (and load, when not quiet).
func subtitle(r *results.Results) string {
	s := fmt.Sprintf("%s; measured, %s, %d cores, %s", r.StackOf().Label(), r.Machine.CPUModel, r.Machine.Cores, dateOf(r))
	if underLoad(r) {
		s += ", under load"
	}
	return s
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	return p
}

func addLine(p *plot.Plot, i int, name string, xys plotter.XYs, dashed bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	c := plotutil.Color(i)
	l.Color, s.Color = c, c
	s.Shape = plotutil.Shape(i)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// Plots writes the PNGs into dir.
func Plots(r *results.Results, dir string) error {
	for _, f := range []func(*results.Results, string) error{plotThroughput, plotLatency, plotMemory, plotAuth} {
		if err := f(r, dir); err != nil {
			return fmt.Errorf("report: plot: %w", err)
		}
	}
	return nil
}

func plotThroughput(r *results.Results, dir string) error {
	p := newPlot("REQUEST_PING closed loop: throughput ("+subtitle(r)+")", "virtual users (log)", "successful RPC/s")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, n := range r.TargetNames() {
		var xys plotter.XYs
		for _, v := range r.Config.VUs {
			if c := r.ClosedFor(n, ping, v); c != nil && c.Stats.Throughput > 0 {
				xys = append(xys, plotter.XY{X: float64(v), Y: c.Stats.Throughput})
			}
		}
		if err := addLine(p, i, n, xys, false); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	headroom(p, false)
	logRange(&p.X)
	return p.Save(plotW, plotH, filepath.Join(dir, "throughput_vs_vus.png"))
}

func plotLatency(r *results.Results, dir string) error {
	p := newPlot("REQUEST_PING closed loop: latency p99 (solid), p50 (dashed) ("+subtitle(r)+")", "virtual users (log)", "ms (log)")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, n := range r.TargetNames() {
		var p99, p50 plotter.XYs
		for _, v := range r.Config.VUs {
			if c := r.ClosedFor(n, ping, v); c != nil && c.Stats.Latency.P99Ms > 0 {
				p99 = append(p99, plotter.XY{X: float64(v), Y: c.Stats.Latency.P99Ms})
				p50 = append(p50, plotter.XY{X: float64(v), Y: max(c.Stats.Latency.P50Ms, 0.001)})
			}
		}
		if err := addLine(p, i, n+" p99", p99, false); err != nil {
			return err
		}
		if err := addLine(p, i, n+" p50", p50, true); err != nil {
			return err
		}
	}
	headroom(p, true)
	logRange(&p.X)
	logRange(&p.Y)
	return p.Save(plotW, plotH, filepath.Join(dir, "latency_vs_vus.png"))
}

func plotMemory(r *results.Results, dir string) error {
	p := newPlot("Daemon RSS against idle connections held ("+subtitle(r)+")", "connections held by the client", "RSS MiB (median during the hold)")
	for i, n := range r.TargetNames() {
		var xys plotter.XYs
		for k, c := range r.Config.Holds {
			h := r.HoldFor(n, c)
			if h == nil {
				continue
			}
			if k == 0 {
				xys = append(xys, plotter.XY{X: 0, Y: mib(h.Baseline.RSSMedianKB)})
			}
			xys = append(xys, plotter.XY{X: float64(h.Hold.Established), Y: mib(h.During.RSSMedianKB)})
		}
		name := n
		if n == results.TargetStock {
			name = "stock (accepts at most 256; the rest wait in the kernel's queue)"
			if r.StackOf().Release != launch.Release2205 {
				name = "stock (serves at most 256 at a time; its conmgr holds the rest)"
			}
		}
		if err := addLine(p, i, name, xys, false); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	p.X.Min = 0
	p.X.Tick.Marker = intTicks
	headroom(p, false)
	return p.Save(plotW, plotH, filepath.Join(dir, "memory_vs_conns.png"))
}

// plotAuth plots what authentication costs: munged's encode and decode rates, or (auth/slurm)
// the in-process token make and verify rates, against concurrency.
func plotAuth(r *results.Results, dir string) error {
	file, title, x, y, an, bn := "munge_rate.png", "munged encode / decode rate", "concurrent munge callers (log)", "credentials/s", "encode", "decode"
	var a, b []results.RatePoint
	switch {
	case !r.StackOf().UsesMunged():
		file, title, x, y, an, bn = "token_rate.png", "auth/slurm token make / verify rate (in-process)", "concurrent callers (log)", "tokens/s", "make", "verify"
		if r.Tokens != nil {
			a, b = r.Tokens.Encode, r.Tokens.Decode
		}
	case r.Munge != nil:
		a, b = r.Munge.Encode, r.Munge.Decode
	}
	p := newPlot(title+" ("+subtitle(r)+")", x, y)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, s := range []struct {
		name string
		pts  []results.RatePoint
	}{{an, a}, {bn, b}} {
		var xys plotter.XYs
		for _, pt := range s.pts {
			xys = append(xys, plotter.XY{X: float64(pt.Concurrency), Y: pt.Rate})
		}
		if err := addLine(p, i, s.name, xys, false); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	headroom(p, false)
	logRange(&p.X)
	return p.Save(plotW, plotH, filepath.Join(dir, file))
}

// logRange gives a log axis without data (a run of `-only` some scenarios) a valid empty
// range; gonum's log scale panics on the default one.
func logRange(a *plot.Axis) {
	if !(a.Min > 0) || !(a.Max > a.Min) {
		a.Min, a.Max = 1, 10
	}
}

// headroom raises the Y axis so the legend (top left) sits above the data.
func headroom(p *plot.Plot, log bool) {
	if log {
		p.Y.Max *= 20
		return
	}
	p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)*1.6
}

// intTicks are the default ticks labelled without decimals.
var intTicks = plot.TickerFunc(func(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%.0f", ts[i].Value)
		}
	}
	return ts
})
