//go:build integration

// Issue 11 finding 10, suspend and resume: `scontrol suspend` of a batch job
// (with an srun step inside) and of an interactive srun job stops every task
// (state T in /proc/<pid>/stat, or D while the cgroup freezer holds it), a signal meanwhile is refused as stock
// refuses it, `scontrol resume` continues them; suspended again, the node
// daemon is restarted (SIGTERM and start) and the tasks stay stopped until
// resumed. Both jobs then finish with the same output and exit as on stock.
// One stock/slurmd-go pair, the same node of each at once.
//
// Run alone: sudo go test -tags integration -count=1 -v -run TestSuspend ./slurmd-go/integration/
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named bounds of the suspend test.
const (
	suspendStopTimeout = 30 * time.Second // every task shows state T (the chain sleeps 2 s)
	suspendContTimeout = 30 * time.Second // every task runs again
	suspendRunTimeout  = 60 * time.Second
	suspendEndTimeout  = 90 * time.Second
	suspendSrunTimeout = 4 * time.Minute
	suspendBatchExit   = 3
	suspendSrunExit    = 5
)

// Each task writes its pid, then waits for its release file; USR1 is trapped
// so that a signal that does get through shows in the output.
var (
	suspendStepTask  = `trap "echo step-usr1" USR1; echo $$ > step.pid; while [ ! -e release ]; do sleep 0.2; done; echo step-done`
	suspendBatch     = fmt.Sprintf("#!/bin/bash\ntrap 'echo batch-usr1' USR1\necho $$ > batch.pid\nsrun -n1 bash -c '%s'\necho batch-done\nexit %d\n", suspendStepTask, suspendBatchExit)
	suspendSrunTasks = fmt.Sprintf(`trap "echo srun-usr1" USR1; echo $$ > srun.pid; while [ ! -e release ]; do sleep 0.2; done; echo srun-done; exit %d`, suspendSrunExit)
)

// suspendRun is what one cluster showed.
type suspendRun struct {
	batchID, srunID string
	usr1            string // scancel -s USR1 while suspended: exit and stderr, normalized
	batch, srunJob  map[string]string
	batchOut        string
	srun            cluster.Result
}

func TestSuspend(t *testing.T) {
	p := startPair(t, restartOptions)
	runs := map[*cluster.Cluster]*suspendRun{}
	var subs []subtest
	for _, c := range p.both() {
		run := &suspendRun{}
		runs[c] = run
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { runSuspend(t, c, run) }})
	}
	concurrently(t, subs...)
	ref, sut := runs[p.ref], runs[p.sut]
	if ref.srunJob == nil || sut.srunJob == nil {
		t.Fatalf("no comparison: a cluster's run did not finish (see its subtest)")
	}
	keys := []string{"JobState", "ExitCode", "DerivedExitCode", "Reason"}
	sameFields(t, "batch job", ref.batch, sut.batch, map[string]string{"JobState": "FAILED", "ExitCode": fmt.Sprintf("%d:0", suspendBatchExit)}, keys...)
	sameFields(t, "srun job", ref.srunJob, sut.srunJob, map[string]string{"JobState": "FAILED", "ExitCode": fmt.Sprintf("%d:0", suspendSrunExit)}, keys...)
	if ref.usr1 != sut.usr1 {
		t.Errorf("scancel -s USR1 while suspended: reference %q, under test %q", ref.usr1, sut.usr1)
	}
	if ref.batchOut != sut.batchOut {
		t.Errorf("batch output: reference %q, under test %q", ref.batchOut, sut.batchOut)
	}
	if ref.srun.Stdout != sut.srun.Stdout || ref.srun.ExitCode != sut.srun.ExitCode {
		t.Errorf("interactive srun: reference %q exit %d, under test %q exit %d", ref.srun.Stdout, ref.srun.ExitCode, sut.srun.Stdout, sut.srun.ExitCode)
	}
	t.Logf("scancel -s USR1 while suspended: %q", ref.usr1)
}

// procState is the state letter of /proc/<pid>/stat ("" if gone).
func procState(pid string) string {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// isStopped: T is a stopped process (SIGSTOP, proctrack/pgid); D is one
// the cgroup freezer holds (proctrack/cgroup freezes for SIGSTOP).
func isStopped(st string) bool { return st == "T" || st == "D" }

// waitStates waits until every pid is stopped (stopped true: isStopped) or
// running again (neither).
func waitStates(t *testing.T, c *cluster.Cluster, what string, pids []string, stopped bool, timeout time.Duration) {
	t.Helper()
	c.WaitFor(t, what, timeout, func() (bool, string) {
		var got []string
		ok := true
		for _, pid := range pids {
			st := procState(pid)
			got = append(got, pid+":"+st)
			if st == "" || isStopped(st) != stopped {
				ok = false
			}
		}
		return ok, strings.Join(got, " ")
	})
}

func readPid(t *testing.T, c *cluster.Cluster, path string) string {
	t.Helper()
	var pid string
	c.WaitFor(t, path+" written", suspendRunTimeout, func() (bool, string) {
		s, _ := readJobFile(t, path)
		pid = strings.TrimSpace(s)
		return strings.HasSuffix(s, "\n") && pid != "", fmt.Sprintf("%q", s)
	})
	return pid
}

func scontrolJobs(t *testing.T, c *cluster.Cluster, verb string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if out, errOut, err := c.Run(t, "", "scontrol", verb, id); err != nil {
			t.Fatalf("scontrol %s %s: %v\n%s%s", verb, id, err, out, errOut)
		}
	}
}

func runSuspend(t *testing.T, c *cluster.Cluster, run *suspendRun) {
	n := node(c, 0)
	user := cluster.TestUser
	dir := c.WorkDir(t, user, "suspend")
	run.batchID = c.SbatchIn(t, user, dir, suspendBatch, "-w", n, "-n1", "-J", "susp-batch", "-o", "batch.out")
	sdir := c.WorkDir(t, user, "suspend", "srun")
	cl, err := c.StartClient(t, cluster.BgCmd{
		Cmd:     cluster.Cmd{User: user, Dir: sdir, CleanEnv: true, Args: []string{"srun", "-w", n, "-n1", "-J", "susp-srun", "bash", "-c", suspendSrunTasks}},
		Timeout: suspendSrunTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	pids := []string{
		readPid(t, c, filepath.Join(dir, "batch.pid")),
		readPid(t, c, filepath.Join(dir, "step.pid")),
		readPid(t, c, filepath.Join(sdir, "srun.pid")),
	}
	c.WaitJob(t, run.batchID, suspendRunTimeout, "RUNNING")
	var srunID string
	c.WaitFor(t, "the srun job is listed", suspendRunTimeout, func() (bool, string) {
		out, _, err := c.Run(t, "", "squeue", "-h", "-n", "susp-srun", "-o", "%i %T")
		fs := strings.Fields(out)
		if err == nil && len(fs) == 2 && fs[1] == "RUNNING" {
			srunID = fs[0]
			return true, ""
		}
		return false, out
	})
	run.srunID = srunID

	// Suspend, a signal meanwhile, resume.
	scontrolJobs(t, c, "suspend", run.batchID, run.srunID)
	waitStates(t, c, "every task stopped", pids, true, suspendStopTimeout)
	c.WaitJob(t, run.batchID, suspendRunTimeout, "SUSPENDED")
	_, errOut, err := c.Run(t, "", "scancel", "-s", "USR1", run.batchID)
	run.usr1 = fmt.Sprintf("err=%v stderr=%s", err != nil, strings.ReplaceAll(errOut, run.batchID, "<JOB>"))
	waitStates(t, c, "every task still stopped after the signal", pids, true, suspendStopTimeout)
	scontrolJobs(t, c, "resume", run.batchID, run.srunID)
	waitStates(t, c, "every task running again", pids, false, suspendContTimeout)

	// Suspended across a restart of the node daemon.
	scontrolJobs(t, c, "suspend", run.batchID, run.srunID)
	waitStates(t, c, "every task stopped before the restart", pids, true, suspendStopTimeout)
	c.KillNode(t, n, syscall.SIGTERM)
	c.StartNodeWith(t, n, c.SlurmdBin)
	waitNodeBack(t, c, n)
	waitStates(t, c, "every task still stopped after the restart", pids, true, suspendStopTimeout)
	scontrolJobs(t, c, "resume", run.batchID, run.srunID)
	waitStates(t, c, "every task running after the restart", pids, false, suspendContTimeout)

	touch(t, filepath.Join(dir, "release"))
	touch(t, filepath.Join(sdir, "release"))
	r := waitBatchAndSrun(t, c, cl, suspendEndTimeout, run.batchID, run.srunID, &run.batch, &run.srunJob)
	run.srun = r
	run.batchOut = mustRead(t, filepath.Join(dir, "batch.out"))
	t.Logf("batch %s %s %s, output %q; srun job %s %s %s, exit %d, stdout %q",
		run.batchID, run.batch["JobState"], run.batch["ExitCode"], run.batchOut,
		run.srunID, run.srunJob["JobState"], run.srunJob["ExitCode"], r.ExitCode, r.Stdout)
	if want := "step-done\nbatch-done\n"; run.batchOut != want {
		t.Errorf("batch output %q, want %q", run.batchOut, want)
	}
	if r.Stdout != "srun-done\n" || r.ExitCode != suspendSrunExit {
		t.Errorf("srun: stdout %q exit %d, want \"srun-done\\n\" and %d", r.Stdout, r.ExitCode, suspendSrunExit)
	}
}
