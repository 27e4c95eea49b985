// Command benchreport regenerates results.md, the plots and (with -rfc) the RFC's generated
// fragments from one or more results.json, without running anything:
//
//	benchreport -dir bench/results/latest -rfc rfc
//	benchreport -dir bench/results/latest -dir bench/results/latest-24.11-slurm -rfc rfc
//	benchreport -zones bench/results/zones -rfc rfc
//
// Each -dir is one run (one Slurm release and auth type) and renders its own fragments. With
// -rfc and more than one -dir, it also writes the releases block (rfc/results-releases.md):
// the runs' headline figures side by side, in -dir order. -zones renders the zone bench's
// results.json (bench/zones) instead, and its RFC block.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tiee-hpc/tiee/bench/internal/report"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// dirs is a repeatable -dir.
type dirs []string

func (d *dirs) String() string     { return strings.Join(*d, ",") }
func (d *dirs) Set(v string) error { *d = append(*d, v); return nil }

func main() {
	var ds dirs
	flag.Var(&ds, "dir", "directory holding results.json (repeat for several runs; default bench/results/latest)")
	rfc := flag.String("rfc", "", "also write the RFC fragments here and refresh its generated blocks")
	check := flag.Bool("check", false, "exit 1 unless every scenario produced numbers with zero protocol errors")
	zones := flag.String("zones", "", "render this zone bench directory (bench/zones' results.json) instead of -dir runs")
	flag.Parse()
	if *zones != "" {
		z, err := results.LoadZones(filepath.Join(*zones, "results.json"))
		if err == nil {
			err = report.RenderZones(z, *zones, *rfc)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		return
	}
	if len(ds) == 0 {
		ds = dirs{"bench/results/latest"}
	}
	if err := run(ds, *rfc, *check); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(ds []string, rfc string, check bool) error {
	var runs []*results.Results
	var srcs []string
	seen := map[string]string{}
	for _, d := range ds {
		src := filepath.Join(d, "results.json")
		res, err := results.Load(src)
		if err != nil {
			return err
		}
		if other, dup := seen[res.StackOf().String()]; dup {
			return fmt.Errorf("%s and %s are both %s runs: one -dir per release and auth type", other, d, res.StackOf().Label())
		}
		seen[res.StackOf().String()] = d
		if err := report.Render(res, d, rfc); err != nil {
			return err
		}
		if check {
			if p := report.Check(res); len(p) > 0 {
				return fmt.Errorf("%s: check failed:\n  %s", src, strings.Join(p, "\n  "))
			}
		}
		runs, srcs = append(runs, res), append(srcs, src)
	}
	if rfc != "" && len(runs) > 1 {
		return report.RenderReleases(runs, srcs, rfc)
	}
	return nil
}
