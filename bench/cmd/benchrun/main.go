// Command benchrun runs the TiEE bench: the stock slurmd, slurmd-go (gnet and plain net) and
// the two limit servers, side by side on one real cluster of one Slurm release and auth type,
// then writes results.json, results.md and the plots into -out, and (with -rfc) the RFC's
// generated fragments.
//
//	benchrun -profile full  -out bench/results/latest -rfc rfc          # make bench (22.05, munge)
//	benchrun -profile full  -release 24.11 -auth slurm -rfc rfc         # ... and 24.11, auth/slurm
//	benchrun -profile smoke -out bench/results/smoke -check             # make bench-smoke
//
// Without -out, results go to bench/results/latest (smoke: bench/results/smoke) for 22.05 with
// munge and to bench/results/latest-<release>-<auth> for any other stack, so each stack's
// results stay.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/report"
	"github.com/tiee-hpc/tiee/bench/internal/runner"
	"github.com/tiee-hpc/tiee/bench/scenarios"
)

func main() {
	profile := flag.String("profile", "full", "full (make bench) or smoke (make bench-smoke)")
	out := flag.String("out", "", "output directory (default bench/results/latest or smoke, suffixed -<release>-<auth> for other stacks than 22.05/munge)")
	release := flag.String("release", launch.Release2205, "Slurm release of slurmctld, the stock slurmd and the clients: 22.05 (the host) or 24.11 (its chroot)")
	authType := flag.String("auth", launch.AuthMunge, "munge (auth/munge, a private munged) or slurm (auth/slurm, a fresh slurm.key; 24.11)")
	rfc := flag.String("rfc", "", "also write the RFC's generated fragments into this directory")
	check := flag.Bool("check", false, "exit 1 unless every scenario produced numbers with zero protocol errors")
	slurmdGo := flag.String("slurmd-go", "bin/slurmd-go", "slurmd-go binary")
	limitSrv := flag.String("limitsrv", "", "limitsrv binary (default: next to benchrun)")
	only := flag.String("only", "", "comma-separated scenario names to run (default: all); results then go by default to bench/results/<names>, and -rfc refreshes only their blocks")
	keep := flag.Bool("keep", false, "keep the cluster's work directory (logs)")
	threads := flag.Int("munged-threads", 0, "munged --num-threads (0: munged's default, 2)")
	sources := flag.Int("sources", runner.DefaultSources, "loopback source addresses for the client")
	waitIdle := flag.Duration("wait-idle", 0, "wait up to this long for the 1-minute load average to drop below -idle-load")
	idleLoad := flag.Float64("idle-load", 1.0, "load average below which the machine counts as quiet")
	flag.Parse()

	stack, err := launch.ParseStack(*release, *authType)
	if err == nil {
		sel := selection(*only)
		err = run(*profile, stack, outDir(*out, *profile, stack, sel), *rfc, *check, *slurmdGo, *limitSrv, sel, *keep, *threads, *sources, *waitIdle, *idleLoad)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

// outDir is -out, or the stack's default directory for profile: for a run of some scenarios
// only (-only), one named after them, so a partial run never replaces a complete one.
func outDir(out, profile string, stack launch.Stack, only map[string]bool) string {
	if out != "" {
		return out
	}
	base := "bench/results/latest"
	if profile == "smoke" {
		base = "bench/results/smoke"
	}
	if len(only) > 0 {
		names := slices.Sorted(maps.Keys(only))
		base = "bench/results/" + strings.Join(names, "+")
		if profile == "smoke" {
			base = "bench/results/smoke-" + strings.Join(names, "+")
		}
	}
	if tag := stack.Tag(); tag != "" {
		base += "-" + tag
	}
	return base
}

// selection is -only's scenario names (empty: every scenario).
func selection(only string) map[string]bool {
	sel := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sel[s] = true
		}
	}
	return sel
}

func run(profile string, stack launch.Stack, out, rfc string, check bool, slurmdGo, limitSrv string, sel map[string]bool, keep bool, threads, sources int,
	waitIdle time.Duration, idleLoad float64) error {
	var p scenarios.Profile
	switch profile {
	case "full":
		p = scenarios.Full()
	case "smoke":
		p = scenarios.Smoke()
	default:
		return fmt.Errorf("-profile %q: want full or smoke", profile)
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	if limitSrv == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		limitSrv = filepath.Join(filepath.Dir(exe), "limitsrv")
	}
	if slurmdGo, err = filepath.Abs(slurmdGo); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := runner.Run(ctx, runner.Options{
		Profile: p, Stack: stack, RepoRoot: repo, SlurmdGo: slurmdGo, LimitSrv: limitSrv, Keep: keep,
		MungedThreads: threads, Sources: sources, Only: sel, Out: os.Stderr, WaitIdle: waitIdle, IdleLoad: idleLoad,
	})
	if err != nil {
		return err
	}
	if err := report.Write(res, out, rfc); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "results of %s in %s (%.0fs)\n", stack.Label(), out, res.WallSeconds)
	if check {
		if problems := report.Check(res); len(problems) > 0 {
			return fmt.Errorf("check failed:\n  %s", strings.Join(problems, "\n  "))
		}
		fmt.Fprintln(os.Stderr, "check: every scenario produced numbers, no protocol errors")
	}
	return ctx.Err()
}
