//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// The MPI test's bounds and sizes.
const (
	mpiTimeout  = 3 * time.Minute // one MPI step: 8 busy-polling ranks per cluster on 2 CPUs
	mpiBigTime  = 6 * time.Minute // the 64-rank step, one cluster at a time
	mpiNodes    = 4
	mpiRanks    = 8
	mpiBigRanks = 64
	mpi4pyRanks = 4
	// MpiParams=ports=: slurmctld's range for --resv-ports, clear of the harness's
	// daemon ports (20000-27799) and the hand-started ones (28000-28499).
	mpiResvLow, mpiResvHigh = 31000, 31999
)

// mpiFlavour is one MPI implementation of Debian and the PMI srun gives it.
type mpiFlavour struct {
	name  string // subtest name
	mpicc string // Debian's compiler wrapper for it
	bin   string // the program built with it
	mpi   string // srun --mpi=
	env   []string
	// failExits are the statuses srun -K exits with when one rank fails: 128+15
	// when srun's SIGTERM ends the waiting ranks. Open MPI 5 (24.11's trixie)
	// also hears of the failure through its PMIx server's event and aborts the
	// ranks itself (status 14) or dies of the step's SIGKILL, whichever is first:
	// stock's races, the same on either daemon.
	failExits []int
}

var (
	mpich = mpiFlavour{name: "MPICH_pmi2", mpicc: "mpicc.mpich", bin: "hello_mpich", mpi: "pmi2", failExits: []int{128 + 15}}
	// Ranks of different nodes share this host: Open MPI's shared-memory
	// transport would take them for neighbours, so TCP only (as on stock), and
	// over loopback, which Open MPI 5 (24.11's trixie) otherwise excludes and
	// then finds no "reachable pairing" between the ranks.
	openmpi = mpiFlavour{name: "OpenMPI_pmix", mpicc: "mpicc.openmpi", bin: "hello_ompi", mpi: "pmix", env: []string{"OMPI_MCA_btl=self,tcp", "OMPI_MCA_btl_tcp_if_include=lo"}, failExits: []int{128 + 15, 14, 128 + 9}}
)

// barrierRe is hello's timing line (rank 0's stderr), which differs from run to run.
var barrierRe = regexp.MustCompile(`(?m)^barrier took ([0-9.]+) s\n`)

// TestMPI (issue 12): real MPI programs under srun's PMI plugins, on 4 nodes, as
// root and as the ordinary user, compared with the stock daemon in the same run:
// MPICH under --mpi=pmi2 and Open MPI under --mpi=pmix (hello with ranks and nodes,
// an allreduce whose sum each rank checks, a timed barrier), a rank that exits
// non-zero or is killed, mpi4py's allreduce, and 64 ranks oversubscribed.
func TestMPI(t *testing.T) {
	p := startPair(t, mpiOptions(t))
	src, err := filepath.Abs("testdata/mpi/hello.c")
	if err != nil {
		t.Fatal(err)
	}
	// One build per cluster and flavour, in the ordinary user's directory (root
	// runs it from there too): each release's own MPI in its chroot.
	dirs := workDirs(t, p, cluster.TestUser, "mpi")
	for _, c := range p.both() {
		for _, f := range []mpiFlavour{mpich, openmpi} {
			out, errOut, err := c.Exec(t, cluster.Cmd{User: cluster.TestUser, Dir: dirs[c], Args: []string{f.mpicc, "-O2", "-o", f.bin, src}})
			if err != nil {
				t.Fatalf("%s: %s: %v\n%s%s", p.label(c), f.mpicc, err, out, errOut)
			}
		}
	}
	// Debian's Slurm 26.05 ships no mpi/pmix plugin (sid's PMIx is 7.0, which it
	// was not built with): srun itself refuses --mpi=pmix there, on any node
	// daemon, so Open MPI and mpi4py cannot run under srun on that release.
	pmix := srunHasPlugin(t, p.ref, "pmix")
	for _, f := range []mpiFlavour{mpich, openmpi} {
		t.Run(f.name, func(t *testing.T) {
			if f.mpi == "pmix" && !pmix {
				testMPISrunRefuses(t, p, dirs, f)
				return
			}
			for _, user := range []string{"root", cluster.TestUser} {
				t.Run(user, func(t *testing.T) { testMPIHello(t, p, dirs, f, user) })
			}
			t.Run("RankExits", func(t *testing.T) { testMPIRankFails(t, p, dirs, f, "exit=3") })
			t.Run("RankKilled", func(t *testing.T) { testMPIRankFails(t, p, dirs, f, "kill=5") })
		})
	}
	if pmix {
		t.Run("MPI4py", func(t *testing.T) { testMPI4py(t, p, dirs) })
	}
	t.Run("SbatchMpiDefault", func(t *testing.T) { testMPISbatch(t, p, dirs) })
	t.Run("Contract", func(t *testing.T) { testMPIContract(t, p, dirs) })
	t.Run("Oversubscribed64", func(t *testing.T) { testMPIOversubscribed(t, p, dirs) })
}

// srunHasPlugin is whether c's release has srun's mpi/<name> plugin.
func srunHasPlugin(t *testing.T, c *cluster.Cluster, name string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(c.Root, "/usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_"+name+".so"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// testMPISrunRefuses: where the release has no plugin for f, srun refuses the
// step itself, the same whatever the node daemon.
func testMPISrunRefuses(t *testing.T, p pair, dirs map[*cluster.Cluster]string, f mpiFlavour) {
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return mpiSrun(t, c, cluster.TestUser, dirs[c], f, srunTimeout, "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(mpiRanks), "./"+f.bin)
	})
	wantExit(t, p, ref, sut, 1)
	if !strings.Contains(ref.Stderr, "Invalid MPI type '"+f.mpi+"'") {
		t.Errorf("%s: srun --mpi=%s without the plugin: %q", p.label(p.ref), f.mpi, ref.Stderr)
	}
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, nil)
}

// mpiOptions is srunOptions with TmpFS=<dir>/%n, a directory of its own per node:
// the PMIx server's directories there are named by uid, job and step only and
// would collide in one host's /tmp. Plain directories: stock's pmixp_mkdir opens
// the parent without following a symlink.
func mpiOptions(t *testing.T) func(impl string) cluster.Options {
	root, err := os.MkdirTemp("", "ti-mpi-tmpfs-")
	if err == nil {
		err = os.Chmod(root, 0o755) // MkdirTemp's 0700 would shut the user out
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return func(impl string) cluster.Options {
		o := srunOptions(impl)
		for i := 1; i <= mpiNodes; i++ {
			// Sticky and world-writable as /tmp: the tasks' TMPDIR.
			dir := filepath.Join(root, fmt.Sprintf("%s%d", o.NodePrefix, i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
		}
		o.Nodes = mpiNodes
		// MpiDefault=pmi2: a step without --mpi gets it (TestMPI/SbatchMpiDefault);
		// the other steps name their plugin.
		o.ExtraConf = append(o.ExtraConf, "TmpFS="+root+"/%n", fmt.Sprintf("MpiParams=ports=%d-%d", mpiResvLow, mpiResvHigh), "MpiDefault=pmi2")
		return o
	}
}

// mpiSrun runs srun with an MPI flavour's environment on c.
func mpiSrun(t *testing.T, c *cluster.Cluster, user, dir string, f mpiFlavour, timeout time.Duration, args ...string) cluster.Result {
	bc := srunCmd(user, dir, timeout, append([]string{"--mpi=" + f.mpi}, args...)...)
	bc.Env = f.env
	return withSlot(c, func() cluster.Result { return c.RunClient(t, bc) })
}

// helloLines is what hello prints on stdout for n ranks placed in blocks on
// mpiNodes nodes (srun's default distribution), node names normalized.
func helloLines(n, nodes int) []string {
	var want []string
	per := (n + nodes - 1) / nodes
	for r := 0; r < n; r++ {
		want = append(want, fmt.Sprintf("hello from rank %d of %d on <NODE>%d", r, n, r/per+1))
	}
	return append(want, fmt.Sprintf("allreduce sum %d of %d ranks ok", n*(n+1)/2, n))
}

// barrierTime takes hello's barrier line out of stderr and checks that it holds a
// time.
func barrierTime(t *testing.T, label, stderr string) (string, time.Duration) {
	t.Helper()
	m := barrierRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Errorf("%s: no barrier time on stderr: %q", label, stderr)
		return stderr, 0
	}
	secs, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Errorf("%s: barrier time %q: %v", label, m[1], err)
	}
	return barrierRe.ReplaceAllString(stderr, ""), time.Duration(secs * float64(time.Second))
}

// testMPIHello: 8 ranks on 4 nodes start, find each other, reduce and meet at a
// barrier; the output and exit status are stock's.
func testMPIHello(t *testing.T, p pair, dirs map[*cluster.Cluster]string, f mpiFlavour, user string) {
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return mpiSrun(t, c, user, dirs[c], f, mpiTimeout, "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(mpiRanks), "./"+f.bin)
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, helloLines(mpiRanks, mpiNodes))
	refErr, refBarrier := barrierTime(t, p.label(p.ref), ref.Stderr)
	sutErr, sutBarrier := barrierTime(t, p.label(p.sut), sut.Stderr)
	sameLines(t, p, "stderr", refErr, sutErr, nil)
	t.Logf("%s %s: barrier %v (stock) %v (%s); srun %v (stock) %v", f.name, user, refBarrier, sutBarrier, p.sut.Impl, ref.Elapsed, sut.Elapsed)
}

// testMPIRankFails: one rank exits 1 (or is killed) after the barrier, without
// MPI_Finalize, while the others wait; with --kill-on-bad-exit srun terminates the
// step (see failExits). The status and srun's lines about the failed rank are
// stock's (whether srun names it alone or in a range of its node's tasks); how
// the other tasks ended depends on when each node's exits reach srun, so those
// are not compared.
func testMPIRankFails(t *testing.T, p pair, dirs map[*cluster.Cluster]string, f mpiFlavour, arg string) {
	rank := strings.SplitN(arg, "=", 2)[1]
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return mpiSrun(t, c, cluster.TestUser, dirs[c], f, mpiTimeout, "-K", "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(mpiRanks), "./"+f.bin, arg)
	})
	ended(t, p, p.ref, ref)
	ended(t, p, p.sut, sut)
	for _, x := range []struct {
		c *cluster.Cluster
		r cluster.Result
	}{{p.ref, ref}, {p.sut, sut}} {
		if !slices.Contains(f.failExits, x.r.ExitCode) {
			t.Errorf("%s: exit status %d, want one of %v: %v", p.label(x.c), x.r.ExitCode, f.failExits, x.r)
		}
	}
	r, _ := strconv.Atoi(rank)
	refSaid, sutSaid := srunTaskEnds(ref.Stderr)[r], srunTaskEnds(sut.Stderr)[r]
	if refSaid == "" {
		t.Errorf("%s: srun said nothing about task %d: %q", p.label(p.ref), r, ref.Stderr)
	}
	if sutSaid != refSaid {
		t.Errorf("%s: srun says task %d %q, stock %q: %q", p.label(p.sut), r, sutSaid, refSaid, sut.Stderr)
	}
	for _, r := range []cluster.Result{ref, sut} {
		if !strings.Contains(r.Stdout, fmt.Sprintf("allreduce sum %d of %d ranks ok", mpiRanks*(mpiRanks+1)/2, mpiRanks)) {
			t.Errorf("the ranks did not reduce before rank %s failed: %v", rank, r)
		}
	}
}

// srunTaskEndRe is srun's line about how tasks of a node ended
// ("srun: error: t2: tasks 4-5: Killed", "...: task 3: Exited with exit code 1").
var srunTaskEndRe = regexp.MustCompile(`(?m)^srun: error: [^:]+: tasks? ([0-9,-]+): (.*)$`)

// srunTaskEnds maps each task srun reported on to how it ended.
func srunTaskEnds(stderr string) map[int]string {
	ends := map[int]string{}
	for _, m := range srunTaskEndRe.FindAllStringSubmatch(stderr, -1) {
		for _, part := range strings.Split(m[1], ",") {
			lo, hi, _ := strings.Cut(part, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if hi == "" {
				b, err2 = a, nil
			}
			for i := a; err1 == nil && err2 == nil && i <= b; i++ {
				ends[i] = m[2]
			}
		}
	}
	return ends
}

// testMPISbatch: MPICH from inside a batch job, its srun naming no plugin
// (MpiDefault=pmi2), as the ordinary user: the job's output is stock's.
func testMPISbatch(t *testing.T, p pair, dirs map[*cluster.Cluster]string) {
	script := "#!/bin/sh\nsrun ./" + mpich.bin + "\n"
	outs := map[*cluster.Cluster]string{}
	for _, c := range p.both() {
		id := c.SbatchIn(t, cluster.TestUser, dirs[c], script, "-p", srunPartition, "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(mpiRanks), "-o", "sbatch.out")
		f := c.WaitJob(t, id, mpiTimeout, cluster.JobTerminalStates...)
		if f["JobState"] != "COMPLETED" || f["ExitCode"] != "0:0" {
			t.Errorf("%s: batch job %s %s %s", p.label(c), id, f["JobState"], f["ExitCode"])
		}
		out, _ := readJobFile(t, filepath.Join(dirs[c], "sbatch.out"))
		outs[c], _ = barrierTime(t, p.label(c), out)
	}
	sameLines(t, p, "the batch job's output", outs[p.ref], outs[p.sut], helloLines(mpiRanks, mpiNodes))
}

// testMPI4py: mpi4py (Debian's, on Open MPI) reduces over 4 ranks on 4 nodes.
func testMPI4py(t *testing.T, p pair, dirs map[*cluster.Cluster]string) {
	prog := "from mpi4py import MPI\nc = MPI.COMM_WORLD\nprint('rank', c.Get_rank(), 'of', c.Get_size(), 'sum', c.allreduce(c.Get_rank() + 1))\n"
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return mpiSrun(t, c, cluster.TestUser, dirs[c], openmpi, mpiTimeout, "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(mpi4pyRanks), "python3", "-c", prog)
	})
	wantExit(t, p, ref, sut, 0)
	var want []string
	for r := 0; r < mpi4pyRanks; r++ {
		want = append(want, fmt.Sprintf("rank %d of %d sum %d", r, mpi4pyRanks, mpi4pyRanks*(mpi4pyRanks+1)/2))
	}
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, want)
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, nil)
}

// testMPIOversubscribed: 64 MPICH ranks on 4 nodes (-O: more ranks than CPUs)
// complete, one cluster after the other (128 busy ranks at once would only
// measure this machine). Its startup time is a benchmark in bench/, not timed here.
func testMPIOversubscribed(t *testing.T, p pair, dirs map[*cluster.Cluster]string) {
	var res [2]cluster.Result
	for i, c := range p.both() {
		res[i] = mpiSrun(t, c, cluster.TestUser, dirs[c], mpich, mpiBigTime, "-O", "-N", strconv.Itoa(mpiNodes), "-n", strconv.Itoa(mpiBigRanks), "./"+mpich.bin)
	}
	wantExit(t, p, res[0], res[1], 0)
	sameLines(t, p, "stdout", res[0].Stdout, res[1].Stdout, helloLines(mpiBigRanks, mpiNodes))
	refErr, _ := barrierTime(t, p.label(p.ref), res[0].Stderr)
	sutErr, _ := barrierTime(t, p.label(p.sut), res[1].Stderr)
	sameLines(t, p, "stderr", refErr, sutErr, nil)
	t.Logf("64 ranks: srun %v (stock) %v (%s)", res[0].Elapsed, res[1].Elapsed, p.sut.Impl)
}

// mpiResvRe is SLURM_STEP_RESV_PORTS as slurmctld writes it: a port or a range.
var mpiResvRe = regexp.MustCompile(`^([0-9]+)(?:-([0-9]+))?$`)

// testMPIContract: the rest of the mpi plugin contract, as on stock nodes.
// --mpi=list is srun's own (it lists the plugins it can load, asking no daemon);
// --mpi=none gives the tasks no PMI; under MpiParams=ports= an --mpi=pmi2 step
// gets reserved ports, the same for every task (an explicit --resv-ports without
// a count asks for none).
func testMPIContract(t *testing.T, p pair, dirs map[*cluster.Cluster]string) {
	none := mpiFlavour{mpi: "none"}
	t.Run("List", func(t *testing.T) {
		ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
			return withSlot(c, func() cluster.Result {
				return c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{User: cluster.TestUser, Dir: dirs[c], CleanEnv: true, Args: []string{"srun", "--mpi=list"}}, Timeout: srunTimeout})
			})
		})
		wantExit(t, p, ref, sut, 0)
		for _, name := range []string{"pmi2", "pmix", "none"} {
			if name == "pmix" && !srunHasPlugin(t, p.ref, name) {
				continue
			}
			if !strings.Contains(ref.Stdout+ref.Stderr, name) {
				t.Errorf("%s: srun --mpi=list does not list %s: %v", p.label(p.ref), name, ref)
			}
		}
		sameLines(t, p, "srun --mpi=list", ref.Stdout+ref.Stderr, sut.Stdout+sut.Stderr, nil)
	})
	t.Run("None", func(t *testing.T) {
		ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
			return mpiSrun(t, c, cluster.TestUser, dirs[c], none, srunTimeout, "-N2", "-n2", "sh", "-c", `echo "$SLURM_PROCID PMI_FD=$PMI_FD PMI_RANK=$PMI_RANK PMIX_RANK=$PMIX_RANK SLURM_MPI_TYPE=$SLURM_MPI_TYPE"`)
		})
		wantExit(t, p, ref, sut, 0)
		sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{
			"0 PMI_FD= PMI_RANK= PMIX_RANK= SLURM_MPI_TYPE=", "1 PMI_FD= PMI_RANK= PMIX_RANK= SLURM_MPI_TYPE="})
		sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, nil)
	})
	// A plugin slurmd-go does not host (cray_shasta: Debian ships it, srun
	// loads it) fails the launch with the reason on srun's stderr, where
	// stock runs the step with that plugin's environment.
	t.Run("Unhosted", func(t *testing.T) {
		for _, c := range p.both() {
			r := mpiSrun(t, c, cluster.TestUser, dirs[c], mpiFlavour{mpi: "cray_shasta"}, srunTimeout, "-N1", "-n1", "echo", "ran")
			ended(t, p, c, r)
			ran := r.ExitCode == 0 && strings.TrimSpace(r.Stdout) == "ran"
			switch {
			case c.Impl != cluster.ImplGo && !ran:
				t.Errorf("%s: srun --mpi=cray_shasta did not run: %v", p.label(c), r)
			case c.Impl == cluster.ImplGo && (strings.Contains(r.Stdout, "ran") || !strings.Contains(r.Stderr, "task 0 launch failed") ||
				!strings.Contains(r.Stderr, "slurmd-go does not host mpi/cray_shasta")):
				t.Errorf("%s: srun --mpi=cray_shasta ran, or its launch did not fail saying why: %v", p.label(c), r)
			}
		}
	})
	t.Run("ResvPorts", func(t *testing.T) {
		ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
			return mpiSrun(t, c, cluster.TestUser, dirs[c], mpich, srunTimeout, "-N4", "-n4", "printenv", "SLURM_STEP_RESV_PORTS")
		})
		wantExit(t, p, ref, sut, 0)
		for _, x := range []struct {
			c *cluster.Cluster
			r cluster.Result
		}{{p.ref, ref}, {p.sut, sut}} {
			lines := sortedLines(x.r.Stdout)
			if len(lines) != 4 || lines[0] != lines[3] {
				t.Errorf("%s: the 4 tasks' SLURM_STEP_RESV_PORTS %q, want one value for all", p.label(x.c), lines)
				continue
			}
			m := mpiResvRe.FindStringSubmatch(lines[0])
			if m == nil {
				t.Errorf("%s: SLURM_STEP_RESV_PORTS=%q is no port range", p.label(x.c), lines[0])
				continue
			}
			for _, v := range m[1:] {
				if n, err := strconv.Atoi(v); v != "" && (err != nil || n < mpiResvLow || n > mpiResvHigh) {
					t.Errorf("%s: SLURM_STEP_RESV_PORTS=%q outside MpiParams=ports=%d-%d", p.label(x.c), lines[0], mpiResvLow, mpiResvHigh)
				}
			}
		}
		sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, nil)
	})
}
