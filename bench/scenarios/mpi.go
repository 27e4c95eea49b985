package scenarios

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Named limits and paths of mpi-startup.
const (
	// mpiSource is the MPI program of the integration suite's TestMPI, built here as it is
	// there: one program for the test and the bench.
	mpiSource = "slurmd-go/integration/testdata/mpi/hello.c"
	// mpiCC is Debian's MPICH compiler wrapper, the stack's own (the host's or the chroot's).
	mpiCC = "mpicc.mpich"
	// mpiNodes is the nodes of each MPI job: the daemon and its extra nodes.
	mpiNodes = 4
	// mpiBuildTimeout bounds the compile (seconds on an idle machine).
	mpiBuildTimeout = 2 * time.Minute
	// mpiRunTimeout bounds one MPI job, srun's start to its exit. 64 ranks start in seconds
	// on two loaded cores; a run that reaches this is a hang.
	mpiRunTimeout = 3 * time.Minute
	// mpiGiveUp is how many failed runs end a daemon's series early (each may cost
	// mpiRunTimeout).
	mpiGiveUp = 2
	// mpiErrorSamples is how many failures are kept verbatim in results.json, and
	// mpiOutputTail how much of a failed run's output each keeps.
	mpiErrorSamples = 3
	mpiOutputTail   = 1500
)

// The lines hello.c writes: every rank's hello (stdout), rank 0's allreduce check (stdout)
// and, after the barrier, rank 0's barrier time (stderr, unbuffered: srun relays it as soon
// as it is written, which marks the moment every rank has passed MPI_Init).
var (
	mpiHelloRe     = regexp.MustCompile(`^hello from rank (\d+) of (\d+) on (\S+)$`)
	mpiAllreduceRe = regexp.MustCompile(`^allreduce sum (\d+) of (\d+) ranks ok$`)
	mpiBarrierRe   = regexp.MustCompile(`^barrier took ([0-9.]+) s$`)
)

// mpiStartup runs, per daemon with a multi-node partition (the stock slurmd and slurmd-go),
// MPIRuns MPICH jobs of MPIRanks ranks on its 4 nodes, `srun -N4 -n<ranks> -O --mpi=pmi2
// hello`, one after another, and records for each the time from srun's start until every
// rank has passed MPI_Init (rank 0's line after a barrier of all ranks reaches srun's stderr)
// and srun's whole wall time. Daemons run one after another.
type mpiStartup struct{}

func (mpiStartup) Name() string { return "mpi-startup" }
func (mpiStartup) Title() string {
	return "MPI job startup: `srun -N4 -n64 -O --mpi=pmi2` of an MPICH program, srun's start until every rank has passed MPI_Init (5 runs in the full profile)"
}

func (mpiStartup) Run(env *Env) error {
	var ts []*Target
	for _, t := range env.daemons() {
		if _, nodes := env.Cluster.Nodeset(t.Node); len(nodes) >= mpiNodes {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return fmt.Errorf("no daemon with a %d-node partition", mpiNodes)
	}
	bin, err := env.buildMPI()
	if err != nil {
		return err
	}
	return eachOf(env, ts, func(t *Target) error {
		r, err := env.mpiSeries(t, bin)
		if r != nil {
			env.Res.MPI = append(env.Res.MPI, *r)
		}
		return err
	})
}

// buildMPI compiles mpiSource with the stack's mpicc.mpich into the cluster's directory
// (visible at the same path inside a chroot) and returns the program's path.
func (e *Env) buildMPI() (string, error) {
	src, err := os.ReadFile(filepath.Join(e.RepoRoot, mpiSource))
	if err != nil {
		return "", fmt.Errorf("mpi-startup: the MPI program: %w", err)
	}
	dir := filepath.Join(e.Cluster.Dir, "mpi")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	c, bin := filepath.Join(dir, "hello.c"), filepath.Join(dir, "hello_mpich")
	if err := os.WriteFile(c, src, 0o644); err != nil {
		return "", err
	}
	out, err := e.Cluster.RunFor(e.Ctx, mpiBuildTimeout, mpiCC, "-O2", "-o", bin, c)
	if err != nil {
		return "", fmt.Errorf("mpi-startup: %s %s (%s; install mpich and libmpich-dev, or run make chroots): %v: %s",
			mpiCC, mpiSource, e.Stack.Label(), err, strings.TrimSpace(out))
	}
	return bin, nil
}

func (e *Env) mpiSeries(t *Target, bin string) (*results.MPIStartup, error) {
	n, ranks := e.Profile.MPIRuns, e.Profile.MPIRanks
	if n <= 0 || ranks < mpiNodes {
		return nil, fmt.Errorf("profile %s: %d MPI runs of %d ranks", e.Profile.Name, n, ranks)
	}
	part, nodes := e.Cluster.Nodeset(t.Node)
	nodes = nodes[:mpiNodes]
	name := "bench-mpi-" + t.Node
	args := []string{"-p", part, "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(ranks), "-O", "--mpi=pmi2", "-K1", "-J", name, bin}
	r := &results.MPIStartup{Target: t.Name, Partition: part, Nodes: nodes, Ranks: ranks, Command: "srun " + strings.Join(args, " "),
		Runs: n, TimeoutS: mpiRunTimeout.Seconds(), Warmup: e.Profile.MPIWarmup}
	fail := func(what string, err error, ms float64) {
		r.Errors++
		r.FailedMs = append(r.FailedMs, ms)
		if len(r.ErrorText) < mpiErrorSamples {
			r.ErrorText = append(r.ErrorText, fmt.Sprintf("%s: %v", what, err))
		}
	}
	if e.Profile.MPIWarmup {
		run, err := e.mpiOnce(name, part, args, ranks, nodes)
		if err != nil {
			fail("warm-up", err, run.wall)
			summarizeMPI(r)
			return r, fmt.Errorf("warm-up %s: %v (see %s)", r.Command, err, e.Cluster.Dir)
		}
		r.WarmupMs = run.wall
	}
	t0 := time.Now()
	for i := 0; i < n && r.Errors < mpiGiveUp; i++ {
		if err := e.Ctx.Err(); err != nil {
			return nil, err
		}
		run, err := e.mpiOnce(name, part, args, ranks, nodes)
		if err != nil {
			fail(fmt.Sprintf("run %d", i+1), err, run.wall)
			continue
		}
		r.StartupMs, r.WallMs, r.BarrierMs = append(r.StartupMs, run.startup), append(r.WallMs, run.wall), append(r.BarrierMs, run.barrier)
	}
	r.Seconds = time.Since(t0).Seconds()
	summarizeMPI(r)
	e.Logf("  %s: %d of %d MPI jobs of %d ranks on %v ok in %.1fs: startup p50 %.0f ms (min %.0f, max %.0f), srun wall p50 %.0f ms (warm-up %.0f ms), %d failed",
		t.Name, r.OK, n, ranks, nodes, r.Seconds, r.Startup.P50, r.Startup.Min, r.Startup.Max, r.Wall.P50, r.WarmupMs, r.Errors)
	if r.Errors > 0 {
		return r, fmt.Errorf("%s: %d of %d runs failed, %d not run (first: %s; see %s)",
			r.Command, r.Errors, n, n-r.OK-r.Errors, r.ErrorText[0], e.Cluster.Dir)
	}
	return r, nil
}

// mpiRun is one MPI job's times (ms from srun's start) and its barrier as rank 0 timed it.
type mpiRun struct{ startup, wall, barrier float64 }

// mpiOnce runs srun args once, bounded by mpiRunTimeout, reading its stderr as it comes to
// time rank 0's line after the barrier, and checks that the output is one MPI job of ranks
// ranks on nodes. A run that fails cancels whatever is left of its job.
func (e *Env) mpiOnce(name, part string, args []string, ranks int, nodes []string) (run mpiRun, err error) {
	ctx, cancel := context.WithTimeout(e.Ctx, mpiRunTimeout)
	defer cancel()
	defer func() {
		if err != nil {
			_, _ = e.Cluster.Run(e.Ctx, "scancel", "-n", name, "-p", part)
		}
	}()
	cmd := e.Cluster.Command(ctx, "srun", args...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return run, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return run, err
	}
	var stderr strings.Builder
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if run.startup == 0 && mpiBarrierRe.MatchString(sc.Text()) {
			run.startup = msSince(t0)
		}
		stderr.WriteString(sc.Text() + "\n")
	}
	werr := cmd.Wait()
	run.wall = msSince(t0)
	if werr != nil {
		if ctx.Err() != nil && e.Ctx.Err() == nil {
			werr = fmt.Errorf("%w (%v, limit %v)", ctx.Err(), werr, mpiRunTimeout)
		}
		return run, fmt.Errorf("%v: %s", werr, tail(stdout.String()+stderr.String(), mpiOutputTail))
	}
	barrier, err := checkMPIOutput(stdout.String(), stderr.String(), ranks, nodes)
	if err != nil {
		return run, fmt.Errorf("%v (stdout begins: %s; stderr begins: %s)", err,
			head(stdout.String(), mpiOutputTail/2), head(stderr.String(), mpiOutputTail/2))
	}
	run.barrier = barrier
	return run, nil
}

// checkMPIOutput checks that stdout and stderr are those of one MPI job of ranks ranks on
// nodes (each rank's hello once, with the job's size, from one of nodes, every node used; one
// allreduce line with the right sum; one barrier line) and returns the barrier's time in ms.
func checkMPIOutput(stdout, stderr string, ranks int, nodes []string) (float64, error) {
	seen := make([]int, ranks)
	used := map[string]bool{}
	hellos, sums, singletons := 0, 0, 0
	for _, l := range strings.Split(stdout, "\n") {
		if m := mpiHelloRe.FindStringSubmatch(l); m != nil {
			hellos++
			rank, _ := strconv.Atoi(m[1])
			size, _ := strconv.Atoi(m[2])
			switch {
			case size == 1 && ranks > 1:
				singletons++
			case size != ranks || rank < 0 || rank >= ranks:
				return 0, fmt.Errorf("hello from rank %d of %d, in a job of %d ranks", rank, size, ranks)
			default:
				seen[rank]++
			}
			if !slices.Contains(nodes, m[3]) {
				return 0, fmt.Errorf("rank %s on %s, not one of the job's nodes %v", m[1], m[3], nodes)
			}
			used[m[3]] = true
		}
		if m := mpiAllreduceRe.FindStringSubmatch(l); m != nil {
			sums++
			sum, _ := strconv.Atoi(m[1])
			size, _ := strconv.Atoi(m[2])
			if want := ranks * (ranks + 1) / 2; size == ranks && sum != want {
				return 0, fmt.Errorf("allreduce sum %d of %d ranks, want %d", sum, size, want)
			}
		}
	}
	if singletons > 0 {
		return 0, fmt.Errorf("%d of %d ranks came up as singletons (rank 0 of 1): the ranks did not find each other through PMI-2", singletons, hellos)
	}
	for rank, n := range seen {
		if n != 1 {
			return 0, fmt.Errorf("rank %d said hello %d times (%d hellos in all, want one per rank of %d)", rank, n, hellos, ranks)
		}
	}
	if len(used) != len(nodes) {
		return 0, fmt.Errorf("ranks ran on %d of the job's %d nodes", len(used), len(nodes))
	}
	if sums != 1 {
		return 0, fmt.Errorf("%d allreduce lines, want rank 0's one", sums)
	}
	var barriers []string
	for _, l := range strings.Split(stderr, "\n") {
		if m := mpiBarrierRe.FindStringSubmatch(l); m != nil {
			barriers = append(barriers, m[1])
		}
	}
	if len(barriers) != 1 {
		return 0, fmt.Errorf("%d barrier lines on stderr, want rank 0's one", len(barriers))
	}
	s, err := strconv.ParseFloat(barriers[0], 64)
	if err != nil {
		return 0, fmt.Errorf("barrier time %q: %w", barriers[0], err)
	}
	return s * 1000, nil
}

// summarizeMPI fills r's statistics from its runs that counted.
func summarizeMPI(r *results.MPIStartup) {
	r.OK = len(r.StartupMs)
	r.Startup, r.Wall = results.Summarize(r.StartupMs), results.Summarize(r.WallMs)
}

func msSince(t0 time.Time) float64 { return float64(time.Since(t0)) / float64(time.Millisecond) }

// head is the first n bytes of s, trimmed.
func head(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// tail is the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
