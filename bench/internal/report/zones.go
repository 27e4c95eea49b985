package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// ZonesBlock is the RFC block (and fragment) of the zone bench.
const ZonesBlock = "results-zones.md"

// zonesPlot is the zone bench's plot: step time against the added delay, per placement.
const zonesPlot = "zones_step_time.png"

// WriteZones saves z into dir (results.json) and renders results.md, the plot and, if rfcDir
// is not empty, the fragment rfcDir/ZonesBlock and its block in the RFC.
func WriteZones(z *results.Zones, dir, rfcDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := z.Save(filepath.Join(dir, "results.json")); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return RenderZones(z, dir, rfcDir)
}

// RenderZones renders what WriteZones does from z, without saving it.
func RenderZones(z *results.Zones, dir, rfcDir string) error {
	src := filepath.ToSlash(filepath.Join(dir, "results.json"))
	if i := strings.Index(src, "bench/results/"); i > 0 {
		src = src[i:] // the repository-relative path, as the RFC names it
	}
	md := fmt.Sprintf("# TiEE zone bench (%s)\n\n%s", z.Profile, ZonesFragment(z, src, ""))
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if !skipPlots {
		if err := plotZones(z, dir); err != nil {
			return fmt.Errorf("report: plot: %w", err)
		}
	}
	if rfcDir == "" {
		return nil
	}
	plots, err := filepath.Rel(rfcDir, dir)
	if err != nil {
		return err
	}
	return writeFragments(rfcDir, map[string]string{ZonesBlock: ZonesFragment(z, src, filepath.ToSlash(plots)+"/")})
}

// zonesProvenance is the line the zones fragment starts with.
func zonesProvenance(z *results.Zones, src string) string {
	m := z.Machine
	load := ""
	var l float64
	if _, err := fmt.Sscanf(m.LoadAvgBefore, "%f", &l); err == nil && l >= results.DefaultQuietBelow {
		load = fmt.Sprintf("; **taken under load**: the 1-minute load average was %.1f when it started", l)
	}
	return fmt.Sprintf("_**Measured on simulated zones** (Slurm %s slurmctld and clients, slurmd-go nodes in network namespaces; profile %s, %s%s) on %s, %d cores, %.1f GiB, %s; %s. Generated from `%s` by `bench/cmd/benchreport`: do not edit by hand._",
		z.Release, z.Profile, z.Started, load, m.CPUModel, m.Cores, float64(m.MemoryMiB)/1024, m.Kernel, m.GoVersion, src)
}

// ZonesFragment is the zones block: the placement table, the plot (if plots is not ""),
// the hard-block table.
func ZonesFragment(z *results.Zones, src, plots string) string {
	var b strings.Builder
	c := z.Config
	b.WriteString(zonesProvenance(z, src) + "\n\n")
	placed := func(pl string) (string, string) {
		for _, s := range z.Steps {
			if s.Placement == pl {
				var ns []string
				for i, n := range s.Nodes {
					ns = append(ns, fmt.Sprintf("%s (%s)", n, s.Zones[i]))
				}
				return strings.Join(ns, ", "), strings.Join(uniqStrings(s.Zones), ", ")
			}
		}
		return "?", "?"
	}
	oneZone, oneZones := placed(results.PlacementOneZone)
	twoZones, _ := placed(results.PlacementTwoZones)
	fmt.Fprintf(&b, "A training step is one ring all-reduce of a %s float32 gradient between the %d tasks of a job, one per node (`bench/cmd/allreduce`, TCP); each job runs %d untimed and %d timed steps, the median is shown. "+
		"**One zone**: `srun --topology=zone` (tiee_topology plugin + job_submit.lua), slurmctld placed it on %s: zone %s. **Two zones**: the %d nodes slurmctld picks without the option, %s (rank order), so every hop of the ring crosses zones. "+
		"Delay model: %s. The RTT column is the measured TCP connect time between two nodes of different zones.\n\n",
		bytesText(c.Bytes), c.Ranks, c.Warmup, c.Iters, oneZone, oneZones, c.Ranks, twoZones, c.DelayModel)
	t := table{head: []string{"added delay (each way)", "cross-zone RTT", "one zone: step time", "two zones: step time", "two zones / one zone", "two zones: min – max"}}
	for _, d := range c.DelaysMS {
		one, two := z.StepFor(results.PlacementOneZone, d), z.StepFor(results.PlacementTwoZones, d)
		if one == nil || two == nil {
			continue
		}
		t.add(fmt.Sprintf("%.2f ms", d), fmt.Sprintf("%.2f ms", two.RTTms), secText(one.MedianS), secText(two.MedianS),
			fmt.Sprintf("**%.2fx**", two.MedianS/one.MedianS), secText(two.MinS)+" – "+secText(two.MaxS))
	}
	b.WriteString(t.String() + "\n")
	if plots != "" {
		b.WriteString(img(plots, zonesPlot, "step time against cross-zone delay, one zone vs two zones") + "\n")
	}
	with, without := z.BlockFor(true), z.BlockFor(false)
	if with != nil && without != nil {
		fmt.Fprintf(&b, "**Hard block** (a drop rule between the zones, as a zone-isolating network policy): a job on %s, the nodes slurmctld picks without the option. "+
			"With the plugin it fails in user_init, before any task starts, once a probe between zones has timed out (probe timeout %.0f s); without it the job holds its %d nodes until the all-reduce itself gives up (its connect timeout here: %.0f s; a training framework waits for its own, longer timeout).\n\n",
			strings.Join(without.Nodes, ", "), c.ProbeTimeoutS, len(without.Nodes), c.ConnectTimeoutS)
		bt := table{head: []string{"case", "nodes held until the job failed", "tasks left", "why it failed (srun's stderr)"}}
		for _, x := range []*results.ZoneBlock{with, without} {
			name := "without the plugin"
			if x.Plugin {
				name = "with tiee_topology"
			}
			bt.add(name, fmt.Sprintf("**%.1f s**", x.HeldS), fmt.Sprintf("%d", x.TasksLeft), "`"+strings.ReplaceAll(x.Message, "`", "'")+"`")
		}
		b.WriteString(bt.String())
		fmt.Fprintf(&b, "\nThe plugin frees the nodes %.1fx sooner (%.1f s against %.1f s).\n", without.HeldS/with.HeldS, with.HeldS, without.HeldS)
	}
	return b.String()
}

func plotZones(z *results.Zones, dir string) error {
	m := z.Machine
	p := newPlot(fmt.Sprintf("Ring all-reduce of %s, %d nodes: step time (measured on simulated zones, %s, %d cores, %s)",
		bytesText(z.Config.Bytes), z.Config.Ranks, m.CPUModel, m.Cores, firstN(z.Started, 10)), "added cross-zone delay, each way (ms)", "median step time (s)")
	for i, pl := range []string{results.PlacementOneZone, results.PlacementTwoZones} {
		var xys plotter.XYs
		for _, d := range z.Config.DelaysMS {
			if s := z.StepFor(pl, d); s != nil {
				xys = append(xys, plotter.XY{X: d, Y: s.MedianS})
			}
		}
		if err := addLine(p, i, pl, xys, false); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	headroom(p, false)
	return p.Save(plotW, plotH, filepath.Join(dir, zonesPlot))
}

func bytesText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func secText(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.1f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}

func uniqStrings(xs []string) []string {
	var u []string
	for _, x := range xs {
		if !slices.Contains(u, x) {
			u = append(u, x)
		}
	}
	return u
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
