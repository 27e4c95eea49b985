//go:build integration

// Issue "Restart and crash without losing a job": the node daemon may crash, be
// stopped, upgraded or restarted while jobs run, and slurmctld may be away while
// they end; no job may notice. TestRestart starts two pairs of clusters (stock
// reference and cluster under test, as in batch_test.go), each case on its own
// node, everything at once:
//
//   - Node: on each of the 4 nodes a batch job and an srun job print a counter
//     (one line every 0.2 s); while they run the node's daemon is SIGKILLed,
//     SIGTERMed, replaced by a copy at another path (an upgrade) or restarted
//     with -c, and started again. The jobs end as if nothing happened (with -c
//     as on stock), `scontrol listpids` finds their steps before and after,
//     `scontrol pidinfo` (REQUEST_JOB_ID) names the job of a task's child, as
//     root and as the user, and the node is back without a Reason and runs a
//     new job.
//   - CtldOutage (its own pair: it stops slurmctld): slurmctld is SIGKILLed for
//     ctldOutage while batch jobs and an srun step end; once it is back every job
//     gets its state and exit code, none stays COMPLETING.
//
// Run alone: sudo TIEE_SLURMD_IMPL=stock go test -tags integration -count=1 -v
// -run TestRestart ./slurmd-go/integration/
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named bounds and values of the restart tests.
const (
	restartTicks        = 40               // counter lines, 0.2 s apart: ~8 s, outlasting the restart
	restartRunTimeout   = 60 * time.Second // a job runs and printed its first line
	restartDowntime     = 1 * time.Second  // the daemon is dead before it starts again
	restartRespond      = 30 * time.Second // the restarted daemon is registered (no '*')
	restartEndTimeout   = 90 * time.Second // a job ends after the restart (COMPLETING included)
	restartSrunTimeout  = 3 * time.Minute  // the srun of a case, from start to end
	ctldOutage          = 60 * time.Second // slurmctld is away this long
	ctldStateSave       = 20 * time.Second // slurmctld wrote its job state (it saves at most every 5 s, SAVE_MAX_WAIT)
	ctldCompleteTimeout = 90 * time.Second // after slurmctld is back: every job ended, none COMPLETING
	restartBatchExit    = 3
	restartSrunExit     = 5
	outageStepExit      = 4
)

// restartOptions: the batch configuration (proctrack/cgroup, KillWait=3,
// MinJobAge=600) without Prolog/Epilog, which would delay srun launches.
func restartOptions(impl string) cluster.Options {
	o := batchOptions(impl)
	o.Prolog, o.Epilog = "", ""
	return o
}

// tickLoop prints 1..restartTicks, one line every 0.2 s.
var tickLoop = fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo $i; i=$((i+1)); sleep 0.2; done`, restartTicks)

// tickLines is what tickLoop prints.
func tickLines() []string {
	var l []string
	for i := 1; i <= restartTicks; i++ {
		l = append(l, fmt.Sprint(i))
	}
	return l
}

// The batch job and the srun task of a node case start a child that lives as long
// as they count (so listpids always has a known child to list), write
// "<pid> <child pid> <job id>" to batch.pid / srun.pid, then count.
var (
	restartBatchScript = fmt.Sprintf("#!/bin/bash\nsleep 300 &\necho $$ $! $SLURM_JOB_ID > batch.pid\n%s\nkill $!\necho end\nexit %d\n", tickLoop, restartBatchExit)
	restartSrunTask    = fmt.Sprintf("sleep 300 & echo $$ $! $SLURM_JOB_ID > srun.pid; %s; kill $!; exit %d", tickLoop, restartSrunExit)
)

// slurmTimeRe matches a time as slurmstepd prints it ("CANCELLED AT ..."; 26.05 also
// starts its error lines with one in milliseconds, "[...T10:16:41.585] error: ").
var slurmTimeRe = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?`)

// TestRestart: the node and slurmctld restart cases, each pair of clusters at once.
func TestRestart(t *testing.T) {
	concurrently(t,
		subtest{"Node", testRestartNodes},
		subtest{"CtldOutage", testCtldOutage},
	)
}

// restartMode is how a node case takes its daemon down and up again.
type restartMode struct {
	name string
	sig  syscall.Signal
	// daemon is the binary and extra arguments of the restart, prepared before
	// the kill so that copying a binary does not lengthen the downtime.
	daemon func(t *testing.T, c *cluster.Cluster) (bin string, extra []string)
}

var restartModes = []restartMode{
	{"SIGKILL", syscall.SIGKILL, func(t *testing.T, c *cluster.Cluster) (string, []string) { return c.SlurmdBin, nil }},
	{"SIGTERM", syscall.SIGTERM, func(t *testing.T, c *cluster.Cluster) (string, []string) { return c.SlurmdBin, nil }},
	{"Upgrade", syscall.SIGTERM, func(t *testing.T, c *cluster.Cluster) (string, []string) { return c.UpgradedDaemon(t), nil }},
	{"CleanStart", syscall.SIGTERM, func(t *testing.T, c *cluster.Cluster) (string, []string) { return c.SlurmdBin, []string{"-c"} }},
}

func (m restartMode) clean() bool { return m.name == "CleanStart" }

func testRestartNodes(t *testing.T) {
	p := startPair(t, restartOptions)
	var cases []subtest
	for i, m := range restartModes {
		cases = append(cases, subtest{m.name, func(t *testing.T) { testNodeRestart(t, p, i, m) }})
	}
	concurrently(t, cases...)
}

// nodeRun is what one cluster showed in a node case.
type nodeRun struct {
	node                  string
	batchID, srunID       string
	batch, srunJob        map[string]string // final `scontrol show job`
	batchOut              string
	srun                  cluster.Result
	pidsBefore, pidsAfter []string // normalized listpids rows of the two jobs
	pidinfoBefore         []string // normalized `scontrol pidinfo` answers
	pidinfoAfter          []string
	stateRestarted        string // sinfo state once the daemon answered again
	downtime              time.Duration
}

// testNodeRestart runs mode on node i of both clusters at the same time and
// compares what they showed.
func testNodeRestart(t *testing.T, p pair, i int, m restartMode) {
	runs := map[*cluster.Cluster]*nodeRun{}
	var subs []subtest
	for _, c := range p.both() {
		run := &nodeRun{}
		runs[c] = run
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { runNodeRestart(t, p, c, i, m, run) }})
	}
	concurrently(t, subs...)
	ref, sut := runs[p.ref], runs[p.sut]
	if ref.srunJob == nil || sut.srunJob == nil {
		t.Fatalf("no comparison: a cluster's case did not finish (see its subtest)")
	}
	keys := []string{"JobState", "ExitCode", "DerivedExitCode", "Reason", "Restarts"}
	var wantBatch, wantSrun map[string]string
	wantStatus := restartSrunExit
	if m.clean() {
		// Stock -c SIGKILLs every step it finds (proctrack signal 9).
		wantBatch = map[string]string{"JobState": "FAILED", "ExitCode": "0:9"}
		wantSrun = wantBatch
		wantStatus = 128 + int(syscall.SIGKILL)
	}
	sameFields(t, "batch job", ref.batch, sut.batch, wantBatch, keys...)
	sameFields(t, "srun job", ref.srunJob, sut.srunJob, wantSrun, keys...)
	refStatus, sutStatus := ref.srun.ExitCode, sut.srun.ExitCode
	for _, c := range p.both() {
		if r := runs[c]; srunAborted(r.srun) {
			t.Logf("%s: srun aborted in its own teardown (exit %d), its status not compared", p.label(c), r.srun.ExitCode)
			if c == p.ref {
				refStatus = wantStatus
			} else {
				sutStatus = wantStatus
			}
		}
	}
	if refStatus != wantStatus || sutStatus != wantStatus {
		t.Errorf("srun exit status %d on the reference, %d under test, want %d", ref.srun.ExitCode, sut.srun.ExitCode, wantStatus)
	}
	sameLines(t, p, "srun stderr", normJobs(p.ref, ref)(ref.srun.Stderr), normJobs(p.sut, sut)(sut.srun.Stderr), nil)
	if m.clean() {
		// How far the counters got depends on timing; the "*** ... CANCELLED"
		// lines must match (not stock's unlink/rmdir errors about the spool
		// files -c already removed).
		if a, b := banners(normJobs(p.ref, ref)(ref.batchOut)), banners(normJobs(p.sut, sut)(sut.batchOut)); !slices.Equal(a, b) || len(a) == 0 {
			t.Errorf("\"***\" lines of the batch output (normalized):\nreference:\n  %q\nunder test:\n  %q", a, b)
		}
	} else if ref.stateRestarted != sut.stateRestarted {
		t.Errorf("node state once back: %q on the reference, %q under test", ref.stateRestarted, sut.stateRestarted)
	}
	if !slices.Equal(ref.pidsBefore, sut.pidsBefore) {
		t.Errorf("listpids before the restart (normalized):\nreference:\n  %q\nunder test:\n  %q", ref.pidsBefore, sut.pidsBefore)
	}
	if !slices.Equal(ref.pidsAfter, sut.pidsAfter) {
		t.Errorf("listpids after the restart (normalized):\nreference:\n  %q\nunder test:\n  %q", ref.pidsAfter, sut.pidsAfter)
	}
	if !slices.Equal(ref.pidinfoBefore, sut.pidinfoBefore) {
		t.Errorf("scontrol pidinfo before the restart (normalized):\nreference:\n  %q\nunder test:\n  %q", ref.pidinfoBefore, sut.pidinfoBefore)
	}
	// Right after a restart stock 24.11 sometimes answers root that it
	// cannot locate a pid it finds for the next query: a step manager
	// still busy with the new slurmd. slurmd-go must find the step's pids
	// as it did before the restart.
	for _, a := range append(sut.pidinfoBefore, sut.pidinfoAfter...) {
		if strings.HasPrefix(a, "job pid") && !strings.Contains(a, "Slurm JobId=<") {
			t.Errorf("scontrol pidinfo, under test: %s (reference: %q, after the restart %q)", a, ref.pidinfoBefore, ref.pidinfoAfter)
		}
	}
	t.Logf("scontrol pidinfo, under test (normalized): %q %q", sut.pidinfoBefore, sut.pidinfoAfter)
	t.Logf("daemon down %v (reference) / %v (under test)", ref.downtime.Round(time.Millisecond), sut.downtime.Round(time.Millisecond))
}

// normJobs normalizes a node case's output: both job ids, the node, the cluster,
// times, srun's queueing lines.
func normJobs(c *cluster.Cluster, r *nodeRun) func(string) string {
	n := srunNormalizer(c, map[string]string{r.batchID: "<BATCH>", r.srunID: "<SRUNJOB>", r.node: "<CASENODE>"})
	return func(s string) string { return slurmTimeRe.ReplaceAllString(n(s), "<TIME>") }
}

// banners are the lines of s that contain "***".
func banners(s string) []string {
	var l []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "***") {
			l = append(l, line)
		}
	}
	return l
}

// runNodeRestart is one cluster's part of a node case; it fills run.
func runNodeRestart(t *testing.T, p pair, c *cluster.Cluster, i int, m restartMode, run *nodeRun) {
	n := node(c, i)
	run.node = n
	user := cluster.TestUser
	dir := c.WorkDir(t, user, "restart", m.name)
	run.batchID = c.SbatchIn(t, user, dir, restartBatchScript, "-w", n, "-n1", "-J", "rs-batch", "-o", "batch.out")
	cl, err := c.StartClient(t, cluster.BgCmd{
		Cmd:     cluster.Cmd{User: user, Dir: dir, CleanEnv: true, Args: []string{"srun", "-w", n, "-n1", "-J", "rs-srun", "bash", "-c", restartSrunTask}},
		Timeout: restartSrunTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.WaitJob(t, run.batchID, restartRunTimeout, "RUNNING")
	waitFileContains(t, c, filepath.Join(dir, "batch.out"), "1\n", restartRunTimeout)
	c.WaitFor(t, "srun prints its first line", restartRunTimeout, func() (bool, string) {
		if cl.Exited() {
			t.Fatalf("srun ended before the restart: %v", cl.Wait())
		}
		return strings.HasPrefix(cl.Stdout(), "1\n"), fmt.Sprintf("stdout %q stderr %q", cl.Stdout(), cl.Stderr())
	})
	bt := readPidFile(t, c, filepath.Join(dir, "batch.pid"))
	st := readPidFile(t, c, filepath.Join(dir, "srun.pid"))
	if bt.job != run.batchID {
		t.Fatalf("batch.pid names job %s, want %s", bt.job, run.batchID)
	}
	run.srunID = st.job
	// The task leads its step (local and global id 0); its child is listed too.
	want := []string{
		bt.task + " " + bt.job + " batch 0 0", bt.child + " " + bt.job + " batch - -",
		st.task + " " + st.job + " 0 0 0", st.child + " " + st.job + " 0 - -",
	}
	pids := map[string]string{bt.task: "<BATCHTASK>", bt.child: "<BATCHCHILD>", st.task: "<SRUNTASK>", st.child: "<SRUNCHILD>"}
	run.pidsBefore = listpids(t, c, n, want, pids, run)
	run.pidinfoBefore = pidinfo(t, c, n, run, bt.child, st.task)

	bin, extra := m.daemon(t, c)
	down := time.Now()
	c.KillNode(t, n, m.sig)
	time.Sleep(restartDowntime)
	c.StartNodeWith(t, n, bin, extra...)
	run.downtime = time.Since(down)
	run.stateRestarted = waitNodeBack(t, c, n)
	if !m.clean() {
		if cl.Exited() {
			t.Errorf("the counter step ended before listpids after the restart; lengthen restartTicks")
		} else {
			run.pidsAfter = listpids(t, c, n, want, pids, run)
			run.pidinfoAfter = pidinfo(t, c, n, run, st.child)
		}
	}

	r := waitBatchAndSrun(t, c, cl, restartEndTimeout, run.batchID, run.srunID, &run.batch, &run.srunJob)
	run.srun = r
	run.batchOut = mustRead(t, filepath.Join(dir, "batch.out"))
	t.Logf("%s: batch %s %s %s; srun job %s %s %s, exit %d; node %q once back after %v down",
		p.label(c), run.batchID, run.batch["JobState"], run.batch["ExitCode"], run.srunID, run.srunJob["JobState"],
		run.srunJob["ExitCode"], r.ExitCode, run.stateRestarted, run.downtime.Round(time.Millisecond))
	if !m.clean() {
		wantJob(t, "batch job", run.batch, "FAILED", fmt.Sprintf("%d:0", restartBatchExit))
		wantJob(t, "srun job", run.srunJob, "FAILED", fmt.Sprintf("%d:0", restartSrunExit))
		if want := strings.Join(append(tickLines(), "end"), "\n") + "\n"; run.batchOut != want {
			t.Errorf("batch output %q, want the whole counter and \"end\"", run.batchOut)
		}
		if want := strings.Join(tickLines(), "\n") + "\n"; r.Stdout != want {
			t.Errorf("srun stdout %q, want every counter line in order", r.Stdout)
		}
		if r.Err != nil || r.ExitCode != restartSrunExit {
			t.Errorf("srun: %v; want exit %d", r, restartSrunExit)
		}
		want := fmt.Sprintf("srun: error: %s: task 0: Exited with exit code %d\n", n, restartSrunExit)
		if got := srunQueuedRe.ReplaceAllString(r.Stderr, ""); got != want {
			t.Errorf("srun stderr %q, want %q", got, want)
		}
		// Two 1-CPU jobs on a 2-CPU node.
		if run.stateRestarted != "allocated" {
			t.Errorf("node %s %q once back, want allocated", n, run.stateRestarted)
		}
	}
	nodeUsable(t, c, n, dir)
}

// waitBatchAndSrun waits for the interactive srun cl (killed after timeout),
// then for the batch job and the srun job to end, and fills their final
// `scontrol show job` fields.
func waitBatchAndSrun(t *testing.T, c *cluster.Cluster, cl *cluster.Client, timeout time.Duration, batchID, srunID string, batch, srunJob *map[string]string) cluster.Result {
	t.Helper()
	r, ok := cl.WaitTimeout(timeout)
	if !ok {
		cl.Kill()
		r = cl.Wait()
		t.Errorf("srun still running %v later: %v", timeout, r)
	}
	*batch = c.WaitJob(t, batchID, timeout, cluster.JobTerminalStates...)
	*srunJob = c.WaitJob(t, srunID, timeout, cluster.JobTerminalStates...)
	return r
}

// waitNodeBack waits until a restarted node's daemon answers again, itself
// and to slurmctld (registered: no '*', not unknown or down), and returns
// its sinfo state. slurmctld may not have noticed the restart at all (a
// second down), so the daemon itself must answer too: a query sent before
// it listens fails at connect.
func waitNodeBack(t *testing.T, c *cluster.Cluster, n string) string {
	t.Helper()
	var state string
	c.WaitFor(t, n+" answers again", restartRespond, func() (bool, string) {
		if _, err := c.ShowSlurmdErr(t, "", n); err != nil {
			return false, "scontrol show slurmd: " + err.Error()
		}
		s, err := c.NodeStates(t, n)
		if err != nil {
			return false, err.Error()
		}
		state = s[n]
		return state != "" && !strings.HasSuffix(state, "*") && !strings.HasPrefix(state, "unk") && !strings.HasPrefix(state, "down"), state
	})
	return state
}

// wantJob checks a job's final state and exit code.
func wantJob(t *testing.T, what string, f map[string]string, state, exit string) {
	t.Helper()
	if f["JobState"] != state || f["ExitCode"] != exit {
		t.Errorf("%s %s: %s ExitCode=%s Reason=%s, want %s %s", what, f["JobId"], f["JobState"], f["ExitCode"], f["Reason"], state, exit)
	}
}

// nodeUsable: the node is idle with no Reason and runs a new job.
func nodeUsable(t *testing.T, c *cluster.Cluster, n, dir string) {
	t.Helper()
	c.WaitNodes(t, "idle", []string{n}, nodeIdleTimeout)
	if f := c.ShowNode(t, n); f["Reason"] != "" || f["State"] != "IDLE" {
		t.Errorf("node %s: State=%s Reason=%q, want IDLE and no Reason", n, f["State"], f["Reason"])
	}
	id := c.SbatchIn(t, cluster.TestUser, dir, "", "-w", n, "-n1", "-o", "new.out", "--wrap", "echo new job")
	f := c.WaitJob(t, id, shortJobTimeout, cluster.JobTerminalStates...)
	wantJob(t, "new job on "+n, f, "COMPLETED", "0:0")
	if out := mustRead(t, filepath.Join(dir, "new.out")); out != "new job\n" {
		t.Errorf("new job on %s: output %q", n, out)
	}
}

// taskPids is what a node case's task wrote to its pid file.
type taskPids struct{ task, child, job string }

// readPidFile waits for "<pid> <child pid> <job id>" in path.
func readPidFile(t *testing.T, c *cluster.Cluster, path string) taskPids {
	t.Helper()
	var f []string
	c.WaitFor(t, path+" written", restartRunTimeout, func() (bool, string) {
		s, _ := readJobFile(t, path)
		f = strings.Fields(s)
		return len(f) == 3 && strings.HasSuffix(s, "\n"), fmt.Sprintf("%q", s)
	})
	return taskPids{f[0], f[1], f[2]}
}

// listpids runs `scontrol listpids '*' <node>`, checks that every row in want
// ("PID JOBID STEPID LOCALID GLOBALID") is there, and returns the rows of the
// pids named in pids, normalized, sorted. Other rows (the counter's short-lived
// sleeps) are left out: whether one is caught is timing.
func listpids(t *testing.T, c *cluster.Cluster, n string, want []string, pids map[string]string, run *nodeRun) []string {
	t.Helper()
	// The node name is an argument: scontrol ignores SLURMD_NODENAME here and
	// would guess the first node of this host.
	out, errOut, err := c.Run(t, "", "scontrol", "listpids", "*", n)
	if err != nil {
		t.Errorf("scontrol listpids '*' %s: %v\nstdout: %s\nstderr: %s", n, err, out, errOut)
		return nil
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] != "PID" {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	for _, w := range want {
		if !slices.Contains(rows, w) {
			t.Errorf("scontrol listpids '*' %s has no row %q:\n%s%s", n, w, out, errOut)
		}
	}
	norm := normJobs(c, run)
	var l []string
	for _, r := range rows {
		f := strings.Fields(r)
		if name, ok := pids[f[0]]; ok {
			f[0] = name
			l = append(l, norm(strings.Join(f, " ")))
		}
	}
	slices.Sort(l)
	return l
}

// pidinfo runs `scontrol pidinfo` on node n (SLURMD_NODENAME: Debian's
// slurm is built for several slurmds per host) for each of pids and for
// pid 1, which is in no job, as root and as the job's user, and returns
// what each printed, normalized; the caller judges it.
func pidinfo(t *testing.T, c *cluster.Cluster, n string, run *nodeRun, pids ...string) []string {
	t.Helper()
	norm := normJobs(c, run)
	var l []string
	for _, user := range []string{"", cluster.TestUser} {
		for _, pid := range append(pids, "1") {
			var out, errOut string
			var err error
			c.WaitFor(t, "scontrol pidinfo without a SACK failure", sackRetryTimeout, func() (bool, string) {
				out, errOut, err = c.RunEnv(t, user, []string{"SLURMD_NODENAME=" + n}, "scontrol", "pidinfo", pid)
				return !sackRace.MatchString(errOut), errOut
			})
			out = pidinfoTimeRe.ReplaceAllString(out, "<WHEN>")
			l = append(l, fmt.Sprintf("%s: %q %q exit=%v", pidOf(pid), norm(strings.TrimSpace(out)), norm(strings.TrimSpace(errOut)), err != nil))
		}
	}
	return l
}

// sackRace is an ordinary user's client failing to get or check a token
// through SACK because the node daemon that owns /run/slurm/sack.socket is
// restarting: every node of a cluster on this host shares that path (see
// cluster.startMountNS), where each real node has its own. Stock and
// slurmd-go alike; the query is asked again.
var sackRace = regexp.MustCompile(`create_external: failed to create token|verify_external: sack_verify failure`)

// sackRetryTimeout bounds how long a query is asked again after sackRace:
// the owner's restart (restartDowntime and start-up).
const sackRetryTimeout = 30 * time.Second

// pidinfoTimeRe: the job's end time and remaining seconds in pidinfo's
// answer, which differ between the clusters.
var pidinfoTimeRe = regexp.MustCompile(`ends at .*|remaining time is -?[0-9]+`)

// pidOf labels a pid in pidinfo's answers (the pids themselves differ
// between the clusters).
func pidOf(pid string) string {
	if pid == "1" {
		return "pid 1"
	}
	return "job pid"
}

// outageJob is one job of the slurmctld outage case.
type outageJob struct {
	name, script  string
	state, exit   string // expected end
	last          string // its output's last line: the job ended
	out           string
	id            string
	fields        map[string]string
	endedInOutage bool
}

func outageJobs() []*outageJob {
	return []*outageJob{
		{name: "ok", script: "#!/bin/bash\nsleep 10\necho ok\n", state: "COMPLETED", exit: "0:0", last: "ok"},
		{name: "fail", script: "#!/bin/bash\nsleep 10\necho fail\nexit 3\n", state: "FAILED", exit: "3:0", last: "fail"},
		{name: "signal", script: "#!/bin/bash\nsleep 10\necho signal\nkill -KILL $$\n", state: "FAILED", exit: "0:9", last: "signal"},
		{name: "step", script: fmt.Sprintf("#!/bin/bash\nsrun -n1 bash -c '%s; exit %d'\nrc=$?\necho srun-exit $rc\nexit $rc\n", tickLoop, outageStepExit),
			state: "FAILED", exit: fmt.Sprintf("%d:0", outageStepExit), last: fmt.Sprintf("srun-exit %d", outageStepExit)},
	}
}

// testCtldOutage: slurmctld is SIGKILLed while four jobs run (one an srun step),
// stays away ctldOutage while they all end (in 26.05 the srun step only once
// slurmctld is back: stockFacts.taskExitAfterStepComplete), and is started again on its saved
// state: every job ends with its state and exit code (as on the reference) within
// ctldCompleteTimeout, no job is left COMPLETING, the nodes are idle without a
// Reason and run new jobs.
func testCtldOutage(t *testing.T) {
	p := startPair(t, restartOptions)
	runs := map[*cluster.Cluster][]*outageJob{}
	var subs []subtest
	for _, c := range p.both() {
		jobs := outageJobs()
		runs[c] = jobs
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { runCtldOutage(t, c, jobs) }})
	}
	concurrently(t, subs...)
	for i, jr := range runs[p.ref] {
		js := runs[p.sut][i]
		if jr.fields == nil || js.fields == nil {
			t.Errorf("job %s: no comparison, a cluster's case did not finish (see its subtest)", jr.name)
			continue
		}
		sameFields(t, "job "+jr.name, jr.fields, js.fields, nil, "JobState", "ExitCode", "DerivedExitCode", "Reason", "Restarts")
		if a, b := normalizer(p.ref, map[string]string{jr.id: "<JOB>"})(jr.out), normalizer(p.sut, map[string]string{js.id: "<JOB>"})(js.out); a != b {
			t.Errorf("job %s output (normalized): %q on the reference, %q under test", jr.name, a, b)
		}
	}
}

// ctldStateSaved makes slurmctld write its job state after everything the test started and
// waits until it has: a job update (a Comment, which no check compares) schedules a save,
// which slurmctld makes within SAVE_MAX_WAIT; the state file's mtime tells. A fixed pause
// was not enough: under load stock's slurmctld was killed before it had saved three of the
// four jobs, came back with a stale record of the fourth and held it (launch_failed_requeued_held).
func ctldStateSaved(t *testing.T, c *cluster.Cluster, jobID string) {
	t.Helper()
	path := filepath.Join(c.Dir, "state", "job_state")
	before := time.Now()
	if out, errOut, err := c.Run(t, "", "scontrol", "update", "JobId="+jobID, "Comment=state-saved"); err != nil {
		t.Fatalf("scontrol update JobId=%s: %v: %s%s", jobID, err, out, errOut)
	}
	if !poll(ctldStateSave, func() bool {
		st, err := os.Stat(path)
		return err == nil && st.ModTime().After(before)
	}) {
		t.Fatalf("slurmctld did not write %s within %v of a job update", path, ctldStateSave)
	}
}

func runCtldOutage(t *testing.T, c *cluster.Cluster, jobs []*outageJob) {
	user := cluster.TestUser
	dir := c.WorkDir(t, user, "outage")
	for _, j := range jobs {
		j.id = c.SbatchIn(t, user, dir, j.script, "-n1", "-J", j.name, "-o", j.name+".out")
	}
	for _, j := range jobs {
		c.WaitJob(t, j.id, restartRunTimeout, "RUNNING")
	}
	// The step runs before slurmctld goes: srun needs it to start one.
	waitFileContains(t, c, filepath.Join(dir, "step.out"), "1\n", restartRunTimeout)
	ctldStateSaved(t, c, jobs[0].id)
	for _, j := range jobs {
		if s, _ := readJobFile(t, filepath.Join(dir, j.name+".out")); strings.Contains(s, j.last) {
			t.Fatalf("job %s ended before slurmctld went away; lengthen it", j.name)
		}
	}
	down := time.Now()
	c.KillCtld(t, syscall.SIGKILL)
	time.Sleep(ctldOutage)
	ticks := strings.Join(tickLines(), "\n") + "\n"
	for _, j := range jobs {
		s, _ := readJobFile(t, filepath.Join(dir, j.name+".out"))
		j.endedInOutage = strings.Contains(s, j.last)
		switch {
		case j.name == "step" && factsOf(t, c).taskExitAfterStepComplete:
			// The task has ended, but the step manager tells srun only once
			// slurmctld has the step's completion: srun is still waiting.
			if s != ticks {
				t.Errorf("job %s after %v of outage: output %q, want the whole counter and no more (srun waits for the task exit, which 26.05 sends after slurmctld took the step completion)", j.name, ctldOutage, s)
			}
		case !j.endedInOutage:
			t.Errorf("job %s had not ended after %v of outage: output %q", j.name, ctldOutage, s)
		}
	}
	c.StartCtld(t)
	back := time.Now()
	t.Logf("slurmctld away %v", back.Sub(down).Round(time.Millisecond))
	for _, j := range jobs {
		j.fields = c.WaitJob(t, j.id, ctldCompleteTimeout-time.Since(back), cluster.JobTerminalStates...)
		j.out = mustRead(t, filepath.Join(dir, j.name+".out"))
		wantJob(t, "job "+j.name, j.fields, j.state, j.exit)
	}
	t.Logf("every job ended %v after slurmctld was back", time.Since(back).Round(time.Millisecond))
	if q := c.Squeue(t); len(q) > 0 {
		t.Errorf("squeue after every job ended: %v", q)
	}
	if want := strings.Join(append(tickLines(), fmt.Sprintf("srun: error: %s: task 0: Exited with exit code %d", jobs[3].fields["BatchHost"], outageStepExit), jobs[3].last), "\n") + "\n"; jobs[3].out != want {
		t.Errorf("step job output %q, want %q", jobs[3].out, want)
	}
	for _, n := range c.NodeNames() {
		nodeUsable(t, c, n, c.WorkDir(t, user, "outage", n))
	}
}
