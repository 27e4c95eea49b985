//go:build integration

package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// mpiHello is the MPI program of the pmix tests: each rank prints its rank,
// the size, its host, an allreduce sum it checks and a timed barrier
// (the time is not printed: it differs from run to run). With "abort", rank
// 1 calls MPI_Abort with status 7 first.
const mpiHello = `#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int rank, size, sum = 0, one;
	char host[256];
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	gethostname(host, sizeof(host));
	if (argc > 1 && rank == 1 && argv[1][0] == 'a')
		MPI_Abort(MPI_COMM_WORLD, 7);
	one = rank + 1;
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	MPI_Barrier(MPI_COMM_WORLD);
	double dt = MPI_Wtime() - t0;
	int ok = sum == size * (size + 1) / 2 && dt >= 0;
	printf("rank %d of %d on %s: sum %d %s\n", rank, size, host, sum, ok ? "ok" : "WRONG");
	MPI_Finalize();
	return ok ? 0 : 3;
}
`

// pmixTmpFS makes the directory of TmpFS=<dir>/tmp-%n for nodes t1..tN: the
// PMIx server's client directories are named by uid, job and step only, so
// the nodes of one host need their own TmpFS (as for stock).
func pmixTmpFS(t *testing.T, nodes int) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "ti-pmix-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= nodes; i++ {
		d := filepath.Join(dir, fmt.Sprintf("tmp-t%d", i))
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o1777); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pmixDirsScript prints, per task, what the PMIx server made: the namespace,
// the server's directory (PMIX_SERVER_TMPDIR, in the spool dir) and the
// client directory in the node's TmpFS with their owners and modes, the job
// id replaced by J.
const pmixDirsScript = `d=$PMIX_SERVER_TMPDIR
cd "$TMPFS_BASE/tmp-$SLURMD_NODENAME" || exit 1
echo "$SLURMD_NODENAME rank $PMIX_RANK $PMIX_NAMESPACE $(basename $d) $(stat -c %U:%a $d) $(ls -d spmix_appdir_*) $(stat -c %U:%a spmix_appdir_*)" | sed "s/$SLURM_JOB_ID/J/g"`

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// mpiConfTimeout bounds waiting for a reconfigured slurmd's steps to use
// mpi.conf (24.11's slurmd re-executes itself; each try is one srun).
const mpiConfTimeout = 90 * time.Second

// pmixRefTries is how often the stock reference of a TestMPI_PMIx case runs
// at most before its failure counts (see DirectModex).
const pmixRefTries = 3

// TestMPI_PMIx (issue 12, parts 2 and 3): what TestMPI does not show of the step
// manager's PMIx server, as on stock nodes: 4 ranks on one node (overcommitted:
// a node has 2 CPUs), direct modex across nodes, the PMIx directories (names,
// owners, modes, removed after each step) and PMIx_Abort's status reaching srun.
// Output (sorted: the ranks print in any order) and exit codes equal stock's. OMPI_MCA_btl=self,tcp:
// the ranks of different nodes share this host, where Open MPI's shared-memory
// transport would crash. Last, mpi.conf's PMIxCliTmpDirBase and PMIxEnv as stock
// uses them (MPIConf).
func TestMPI_PMIx(t *testing.T) {
	tmpBase := map[string]string{}
	p := startPair(t, func(impl string) cluster.Options {
		tmpBase[impl] = pmixTmpFS(t, 4)
		return cluster.Options{Impl: impl, Nodes: 4, ExtraConf: []string{"TmpFS=" + tmpBase[impl] + "/tmp-%n"}}
	})
	base := map[*cluster.Cluster]string{p.ref: tmpBase[cluster.ImplStock], p.sut: tmpBase[""]}
	user := cluster.TestUser
	dirs := map[*cluster.Cluster]string{}
	for _, c := range p.both() {
		dir := c.WorkDir(t, user, "mpi")
		if err := os.WriteFile(filepath.Join(dir, "hello.c"), []byte(mpiHello), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, err := c.Exec(t, cluster.Cmd{User: user, Dir: dir, Args: []string{"mpicc.openmpi", "-o", "hello", "hello.c"}}); err != nil {
			t.Fatalf("%s: mpicc.openmpi: %v\n%s%s", p.label(c), err, out, errOut)
		}
		dirs[c] = dir
	}
	host, _ := os.Hostname()
	rankLines := func(n int) []string {
		var want []string
		for r := 0; r < n; r++ {
			want = append(want, fmt.Sprintf("rank %d of %d on %s: sum %d ok", r, n, host, n*(n+1)/2))
		}
		slices.Sort(want)
		return want
	}
	for _, tc := range []struct {
		name, user string
		args       []string
		want       []string
		exitCode   int
		// raceExit is another status stock may end with (0: none)
		raceExit int
		env      []string
	}{
		{"OneNode", user, []string{"-N1", "-n4", "--overcommit", "./hello"}, rankLines(4), 0, 0, nil},
		// Open MPI 4.1 (22.05's) fences without data and asks each peer's
		// address by direct modex (the Open MPI 5 of 24.11 has no such knobs:
		// there it is one more ordinary run)
		{"DirectModex", user, []string{"-N4", "-n8", "./hello"}, rankLines(8), 0, 0,
			[]string{"OMPI_MCA_pmix_base_async_modex=1", "OMPI_MCA_pmix_base_collect_data=0"}},
		{"Directories", user, []string{"-N2", "-n2", "-w", strings.Join(p.sut.NodeNames()[:2], ","), "sh", "-c", pmixDirsScript}, dirLines(t, user, p.sut.NodeNames()[:2]), 0, 0, nil},
		// PMIx_Abort: srun exits with the status (its abort agent got it) and the step
		// is killed. Open MPI 5 (24.11's) also hears of the abort through its PMIx
		// event and may exit 14 itself first: stock's race, the same on either daemon.
		{"Abort", user, []string{"-N2", "-n4", "./hello", "abort"}, []string{""}, 7, 14, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				out      []string
				errOut   string
				exitCode int
			}
			run := func(c *cluster.Cluster) result {
				out, errOut, err := c.Exec(t, cluster.Cmd{
					User: tc.user, Dir: dirs[c], CleanEnv: true,
					Args: append([]string{"srun", "--mpi=pmix"}, tc.args...),
					Env:  append([]string{"OMPI_MCA_btl=self,tcp", "OMPI_MCA_btl_tcp_if_include=lo", "TMPFS_BASE=" + base[c]}, tc.env...),
				})
				lines := strings.Split(strings.TrimSpace(out), "\n")
				slices.Sort(lines)
				return result{lines, errOut, exitCodeOf(err)}
			}
			ok := func(r result) bool {
				return (r.exitCode == tc.exitCode || (tc.raceExit != 0 && r.exitCode == tc.raceExit)) && slices.Equal(r.out, tc.want)
			}
			res := map[*cluster.Cluster]result{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, c := range p.both() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := run(c)
					mu.Lock()
					res[c] = r
					mu.Unlock()
				}()
			}
			wg.Wait()
			// The reference is the oracle, and stock's direct modex under the
			// two clusters' load fails now and then (measured in CI: Open MPI's
			// "PML add procs failed ... Not found" with the stock slurmd, the
			// slurmd-go run beside it fine): it is asked again, alone; the
			// cluster under test gets one try.
			for try := 2; try <= pmixRefTries && !ok(res[p.ref]); try++ {
				t.Logf("%s: try %d of %d failed (exit %d, stderr %q); again, alone", p.label(p.ref), try-1, pmixRefTries, res[p.ref].exitCode, res[p.ref].errOut)
				res[p.ref] = run(p.ref)
			}
			ref, sut := res[p.ref], res[p.sut]
			for _, c := range p.both() {
				if r := res[c]; !ok(r) {
					t.Errorf("%s: srun --mpi=pmix %v exited %d, stdout %q (stderr %q), want %d and %q",
						p.label(c), tc.args, r.exitCode, r.out, r.errOut, tc.exitCode, tc.want)
				}
			}
			if (ref.exitCode != sut.exitCode && tc.raceExit == 0) || !slices.Equal(ref.out, sut.out) {
				t.Errorf("stock exited %d with %q, %s %d with %q", ref.exitCode, ref.out, p.sut.Impl, sut.exitCode, sut.out)
			}
		})
	}
	// mpi.conf beside slurm.conf (issue 12, part 3): stock's slurmd reads it
	// when it starts and on reconfigure, slurmd-go's step manager at every
	// step; written last so that the steps above use TmpFS. One node: a
	// PMIxCliTmpDirBase is shared by every node of this host.
	t.Run("MPIConf", func(t *testing.T) {
		uid, _, err := cluster.LookupUser(user)
		if err != nil {
			t.Fatal(err)
		}
		cliBase := map[*cluster.Cluster]string{}
		for _, c := range p.both() {
			d := filepath.Join(c.Dir, "pmix-cli")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			cliBase[c] = d
			conf := "# PMIx keys of mpi/pmix\nPMIxCliTmpDirBase=" + d + "\nPMIxEnv=TIEE_PMIX_ENV=set\n"
			if err := os.WriteFile(filepath.Join(filepath.Dir(c.ConfPath), "mpi.conf"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			c.MustRun(t, "", "scontrol", "reconfigure")
		}
		want := fmt.Sprintf("set spmix_appdir_%d_J.0", uid)
		got := map[*cluster.Cluster]string{}
		for _, c := range p.both() {
			c.WaitFor(t, p.label(c)+": a step sees mpi.conf's PMIxEnv and PMIxCliTmpDirBase", mpiConfTimeout, func() (bool, string) {
				out, errOut, err := c.Exec(t, cluster.Cmd{
					User: user, Dir: dirs[c], CleanEnv: true, Env: []string{"CLI_BASE=" + cliBase[c]},
					Args: []string{"srun", "--mpi=pmix", "-N1", "-n1", "sh", "-c", `echo "$TIEE_PMIX_ENV $(ls "$CLI_BASE")" | sed "s/$SLURM_JOB_ID/J/g"`},
				})
				got[c] = strings.TrimSpace(out)
				return err == nil && got[c] == want, fmt.Sprintf("stdout %q, stderr %q, err %v; want %q", got[c], errOut, err, want)
			})
			c.WaitFor(t, p.label(c)+": the client directory removed from PMIxCliTmpDirBase", shortJobTimeout, func() (bool, string) {
				m, _ := filepath.Glob(filepath.Join(cliBase[c], "*"))
				return len(m) == 0, fmt.Sprintf("left: %v", m)
			})
		}
		if got[p.ref] != got[p.sut] {
			t.Errorf("stock printed %q, %s %q", got[p.ref], p.sut.Impl, got[p.sut])
		}
	})
	// Every step's directories are gone once it ended (pmixp_libpmix_finalize).
	for _, c := range p.both() {
		c.WaitFor(t, p.label(c)+": the steps' PMIx directories removed", shortJobTimeout, func() (bool, string) {
			var left []string
			for _, n := range c.NodeNames() {
				for _, pat := range []string{filepath.Join(base[c], "tmp-"+n, "*"), filepath.Join(c.Dir, "spool", n, "*pmix*")} {
					m, _ := filepath.Glob(pat)
					left = append(left, m...)
				}
			}
			return len(left) == 0, fmt.Sprintf("left: %v", left)
		})
	}
}

// dirLines is what pmixDirsScript prints on stock nodes, one line per node.
func dirLines(t *testing.T, user string, nodes []string) []string {
	uid, _, err := cluster.LookupUser(user)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for r, n := range nodes {
		want = append(want, fmt.Sprintf("%s rank %d slurm.pmix.J.0 pmix.J.0 %s:700 spmix_appdir_%d_J.0 %s:700", n, r, user, uid, user))
	}
	slices.Sort(want)
	return want
}
