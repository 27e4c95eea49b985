// Command benchreport regenerates results.md, the plots and (with -rfc) the RFC's generated
// fragments from a results.json, without running anything:
//
//	benchreport -dir bench/results/latest -rfc rfc
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

func main() {
	dir := flag.String("dir", "bench/results/latest", "directory holding results.json")
	rfc := flag.String("rfc", "", "also write the RFC fragments here and refresh its generated blocks")
	check := flag.Bool("check", false, "exit 1 unless every scenario produced numbers with zero protocol errors")
	flag.Parse()
	res, err := results.Load(filepath.Join(*dir, "results.json"))
	if err == nil {
		err = report.Render(res, *dir, *rfc)
	}
	if err == nil && *check {
		if p := report.Check(res); len(p) > 0 {
			err = fmt.Errorf("check failed:\n  %s", strings.Join(p, "\n  "))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}
