//go:build integration

// SPANK plugins on a real cluster (shared/reference/spank-ckpt.md §1): the test's
// own C fixture spank/test/trace.c, built for the cluster's release, traces every
// hook in every context (srun and sbatch as the user, slurmstepd, slurmd and the
// job_script prolog/epilog processes) with credentials, items, options and
// environment; the traces of the stock slurmd and of the cluster under test must
// be the same line for line. TestSpank_Required fails one hook of a required and
// of an optional plugin; TestSpank_PBS loads Debian's spank_pbs.so.
//
// Configuration: batchOptions (proctrack/cgroup, Prolog/Epilog) plus PlugStack;
// no PrologFlags=Contain, so there is no extern step. Each cluster writes its
// traces to its own world-writable directory. TestSpank_Required rewrites
// plugstack.conf between its cases (SetPlugStack): srun and every new slurmstepd
// read it when they start.
//
// With TIEE_SLURMD_IMPL=stock both clusters are stock slurmd: the tests then check
// that the comparison itself is stable.
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Bounds of the SPANK tests.
const (
	spankSrunTimeout  = 90 * time.Second // one srun of a short step, allocation included
	spankTraceTimeout = 60 * time.Second // the last hooks (exit, job_epilog) are written after srun/the job ends
)

// traceSource is the fixture's source in the repository.
func traceSource(t *testing.T) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return filepath.Join(root, "spank", "test", "trace.c")
}

// traceDir makes a directory every process may write its trace to (srun and sbatch
// run as the user), removed at the end of the test.
func traceDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "ti-trace-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o1777); err != nil {
		t.Fatalf("%v", err)
	}
	return d
}

// spankPair starts a pair whose plugstack.conf is plugstack(traceDir): each cluster
// gets its own trace directory, returned by cluster.
func spankPair(t *testing.T, plugstack func(dir string) string) (pair, map[*cluster.Cluster]string) {
	t.Helper()
	var dirs []string
	p := startPair(t, func(impl string) cluster.Options {
		o := batchOptions(impl)
		d := traceDir(t)
		dirs = append(dirs, d)
		o.PlugStack = plugstack(d)
		return o
	})
	return p, map[*cluster.Cluster]string{p.ref: dirs[0], p.sut: dirs[1]}
}

// traceTaskCmd is what each task of the traced steps runs: the variables the
// plugin set and unset, from the task's own environment.
const traceTaskCmd = `echo "task=$SLURM_PROCID plugin=${TRACE_PLUGIN_VAR-unset} srunvar=${TRACE_SRUN_VAR-unset} unsetvar=${TRACE_UNSET_VAR-unset} spankopt=${_SLURM_SPANK_OPTION_trace_trace_opt-unset}"`

// traceEnv is the client environment of a traced run named tag.
func traceEnv(tag string) []string {
	return []string{"TRACE_TAG=" + tag, "TRACE_SRUN_VAR=fromsrun", "TRACE_UNSET_VAR=tobeunset"}
}

// traceRun is what one cluster showed in TestSpank_Trace, normalized.
type traceRun struct {
	srunOut, batchOut []string
	srunRC            int
	batchState        string
	trace             []string // normalized trace blocks (traceBlocks)
}

func TestSpank_Trace(t *testing.T) {
	so := cluster.BuildSpankPlugin(t, "", traceSource(t))
	p, dirs := spankPair(t, func(d string) string {
		return fmt.Sprintf("required %s trace=%s\n", so, d)
	})
	runs := make([]*traceRun, 2) // p.both() order; each goroutine writes its own slot
	var subs []subtest
	for i, c := range p.both() {
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { runs[i] = spankTrace(t, c, dirs[c]) }})
	}
	concurrently(t, subs...)
	ref, sut := runs[0], runs[1]
	if ref == nil || sut == nil {
		t.Fatal("a cluster did not finish its run")
	}
	t.Logf("reference trace:\n%s", strings.Join(ref.trace, "\n"))
	checkTraceReference(t, ref)
	for _, cmp := range []struct {
		what     string
		ref, sut any
	}{
		{"srun's exit code", ref.srunRC, sut.srunRC},
		{"srun's task output", ref.srunOut, sut.srunOut},
		{"the batch job's state", ref.batchState, sut.batchState},
		{"the batch job's output", ref.batchOut, sut.batchOut},
	} {
		if fmt.Sprint(cmp.ref) != fmt.Sprint(cmp.sut) {
			t.Errorf("%s differs:\nreference:  %q\nunder test: %q", cmp.what, cmp.ref, cmp.sut)
		}
	}
	compareLines(t, "SPANK trace", ref.trace, sut.trace)
}

// compareLines reports the first differing line of two normalized texts and both
// texts in full.
func compareLines(t *testing.T, what string, ref, sut []string) {
	t.Helper()
	n := max(len(ref), len(sut))
	for i := 0; i < n; i++ {
		var r, s string
		if i < len(ref) {
			r = ref[i]
		}
		if i < len(sut) {
			s = sut[i]
		}
		if r != s {
			t.Errorf("%s differs at line %d (reference %d lines, under test %d):\nreference:  %s\nunder test: %s\n--- reference:\n%s\n--- under test:\n%s",
				what, i+1, len(ref), len(sut), r, s, strings.Join(ref, "\n"), strings.Join(sut, "\n"))
			return
		}
	}
}

// checkTraceReference checks facts of spank-ckpt.md §1 on the reference alone, so
// that a stock-against-stock run still tests something.
func checkTraceReference(t *testing.T, ref *traceRun) {
	t.Helper()
	want := []string{"task=0 plugin=fromplugin srunvar=fromsrun unsetvar=unset", "task=1 plugin=fromplugin srunvar=fromsrun unsetvar=unset"}
	for _, w := range want {
		found := false
		for _, l := range ref.srunOut {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("reference: no task printed %q: %q", w, ref.srunOut)
		}
	}
	all := strings.Join(ref.trace, "\n")
	for _, re := range []string{
		`(?m)^hook=user_init ctx=remote remote=1 role=main pid=self=first .* uid=0 euid=\d*[1-9]\d* `,
		`(?m)^hook=task_init ctx=remote remote=1 role=task0 .* uid=[1-9]\d* euid=[1-9]\d* `,
		`(?m)^hook=option ctx=remote remote=1 .* val=1 optarg=val `,
		`(?m)^hook=job_prolog ctx=job_script `,
		`(?m)^hook=job_epilog ctx=job_script `,
		`(?m)^hook=init ctx=slurmd `,
		`(?m)^hook=local_user_init ctx=local remote=0 `,
		`(?m)^hook=init ctx=allocator `,
	} {
		if !regexp.MustCompile(re).MatchString(all) {
			t.Errorf("reference trace has no line matching %s", re)
		}
	}
}

// spankTrace runs one cluster's part of TestSpank_Trace: an srun of two tasks with
// both options, then a batch job with the option in an #SBATCH line that runs one
// srun step, each on the first node, and returns what they showed.
func spankTrace(t *testing.T, c *cluster.Cluster, dir string) *traceRun {
	run := &traceRun{}
	work := c.WorkDir(t, cluster.TestUser, "spank")
	n0 := node(c, 0)
	r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{
		User: cluster.TestUser, Dir: work, CleanEnv: true, Env: traceEnv("srun"),
		Args: []string{"srun", "-N1", "-n2", "-w", n0, "--job-name=spank-srun", "--trace-opt=val", "--trace-flag",
			"/bin/sh", "-c", traceTaskCmd + `; echo "job=$SLURM_JOB_ID"`},
	}, Timeout: spankSrunTimeout})
	if r.Err != nil {
		t.Fatalf("%v", r)
	}
	run.srunRC = r.ExitCode
	srunJob := ""
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if v, ok := strings.CutPrefix(l, "job="); ok {
			srunJob = v
			continue
		}
		run.srunOut = append(run.srunOut, l)
	}
	sort.Strings(run.srunOut)
	if srunJob == "" {
		t.Fatalf("srun printed no job id: %v\nstderr: %s", r, r.Stderr)
	}
	c.WaitJob(t, srunJob, shortJobTimeout, cluster.JobTerminalStates...)

	script := "#!/bin/bash\n#SBATCH --trace-opt=b\n#SBATCH -N1 -n1 -w " + n0 + " -o " + work + "/batch.out\n" +
		"srun -n1 /bin/sh -c '" + strings.ReplaceAll(traceTaskCmd, "'", `'\''`) + "'\n"
	out, errOut, err := c.Exec(t, cluster.Cmd{
		User: cluster.TestUser, Dir: work, CleanEnv: true, Env: traceEnv("sbatch"),
		Args: []string{"sbatch", "--parsable", "--job-name=spank-batch"}, Stdin: script,
	})
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, errOut)
	}
	batchJob, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	f := c.WaitJob(t, batchJob, shortJobTimeout, cluster.JobTerminalStates...)
	run.batchState = f["JobState"] + " " + f["ExitCode"]
	if b, err := os.ReadFile(filepath.Join(work, "batch.out")); err == nil {
		run.batchOut = strings.Split(strings.TrimSpace(string(b)), "\n")
	}

	// exit (after the step's I/O) and job_epilog (after the job) come last. Not
	// fatal: a cluster that never writes them shows the difference below.
	for _, j := range []string{srunJob, batchJob} {
		ep := regexp.MustCompile(`(?m)^hook=job_epilog .* S_JOB_ID=` + j + ` `)
		ex := regexp.MustCompile(`(?m)^hook=exit ctx=remote .* S_JOB_ID=` + j + ` `)
		for deadline := time.Now().Add(spankTraceTimeout); ; time.Sleep(filePoll) {
			all := readTraces(t, dir)
			if ep.MatchString(all) && ex.MatchString(all) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("job %s: no job_epilog and remote exit hook traced after %v", j, spankTraceTimeout)
				break
			}
		}
	}
	words := normalizer(c, map[string]string{srunJob: "<JOB1>", batchJob: "<JOB2>"})
	norm := func(s string) string { return spoolJobDir.ReplaceAllString(words(s), "${1}<ID>/") }
	run.trace = traceBlocks(t, dir, norm)
	return run
}

// spoolJobDir is a batch script's directory, SlurmdSpoolDir/job%05u.
var spoolJobDir = regexp.MustCompile(`(/spool/<NODE>\d+/job)\d+/`)

// readTraces is every trace file of dir, concatenated.
func readTraces(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.*"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("%v", err)
		}
		b.Write(data)
	}
	return b.String()
}

// traceField is the value of key in one trace line ("" if absent).
func traceField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// traceBlocks turns dir's trace files into sorted, normalized blocks: one per
// process and role (the step's main process, each task child), headed by
// "== <context> tag=<TRACE_TAG> job=<id> step=<id> first=<first hook> role=<role>".
// File names (pids) are dropped; within a role, runs of the same hook (the
// per-task task_post_fork and task_exit lines, option callbacks) are sorted, as
// tasks may be reaped in any order.
func traceBlocks(t *testing.T, dir string, norm func(string) string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.*"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	type block struct {
		head  string
		lines []string
	}
	var blocks []block
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("%v", err)
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		ctx, _, _ := strings.Cut(filepath.Base(f), ".")
		var job, step, first, tag string
		roles := map[string][]string{}
		var order []string
		for _, l := range lines {
			if first == "" {
				first = traceField(l, "hook")
				tag = traceField(l, "tag")
			}
			if v := traceField(l, "S_JOB_ID"); job == "" && v != "" && !strings.HasPrefix(v, "!") {
				job = v
			}
			if v := traceField(l, "S_JOB_STEPID"); step == "" && v != "" && !strings.HasPrefix(v, "!") {
				step = v
			}
			role := traceField(l, "role")
			if _, ok := roles[role]; !ok {
				order = append(order, role)
			}
			roles[role] = append(roles[role], norm(l))
		}
		for _, role := range order {
			ls := roles[role]
			for i := 0; i < len(ls); {
				j := i
				for j < len(ls) && traceField(ls[j], "hook") == traceField(ls[i], "hook") {
					j++
				}
				sort.Strings(ls[i:j])
				i = j
			}
			blocks = append(blocks, block{
				head:  norm(fmt.Sprintf("== %s tag=%s job=%s step=%s first=%s role=%s", ctx, tag, job, step, first, role)),
				lines: ls,
			})
		}
	}
	sort.SliceStable(blocks, func(i, j int) bool {
		if blocks[i].head != blocks[j].head {
			return blocks[i].head < blocks[j].head
		}
		return strings.Join(blocks[i].lines, "\n") < strings.Join(blocks[j].lines, "\n")
	})
	var out []string
	for _, b := range blocks {
		out = append(out, b.head)
		out = append(out, b.lines...)
	}
	return out
}

// spankFailCase is one case of TestSpank_Required.
type spankFailCase struct {
	mode string // "required" or "optional"
	fail string // trace.c's fail= argument
}

// spankFailRun is how one failure case ended on one cluster, normalized.
type spankFailRun struct {
	rc       int
	stdout   string
	stderr   []string
	jobState string
}

func TestSpank_Required(t *testing.T) {
	so := cluster.BuildSpankPlugin(t, "", traceSource(t))
	p, dirs := spankPair(t, func(d string) string {
		return fmt.Sprintf("required %s trace=%s\n", so, d)
	})
	var cases []spankFailCase
	for _, mode := range []string{"required", "optional"} {
		for _, fail := range []string{"init@local", "init@remote", "user_init", "task_init_privileged", "task_init", "task_exit"} {
			cases = append(cases, spankFailCase{mode, fail})
		}
	}
	for i, tc := range cases {
		name := tc.mode + "/" + strings.ReplaceAll(tc.fail, "@", "_")
		t.Run(name, func(t *testing.T) {
			runs := make([]*spankFailRun, 2)
			var subs []subtest
			for k, c := range p.both() {
				c.SetPlugStack(t, fmt.Sprintf("%s %s trace=%s fail=%s\n", tc.mode, so, dirs[c], tc.fail))
				subs = append(subs, subtest{p.label(c), func(t *testing.T) { runs[k] = spankFail(t, c, i) }})
			}
			concurrently(t, subs...)
			ref, sut := runs[0], runs[1]
			if ref == nil || sut == nil {
				t.Fatal("a cluster did not finish its run")
			}
			t.Logf("reference: rc=%d job=%s stdout=%q stderr=%q", ref.rc, ref.jobState, ref.stdout, ref.stderr)
			if tc.mode == "optional" && (ref.rc != 0 || ref.stdout != "hello") {
				t.Errorf("reference: an optional plugin's failure stopped the step: rc=%d stdout=%q", ref.rc, ref.stdout)
			}
			// Stock 22.05: a required plugin failing before exec (init, user_init,
			// task_init*) stops the task ("hello" never printed), though srun may
			// still exit 0 (a launch failure); task_exit only logs.
			if tc.mode == "required" && tc.fail != "task_exit" && (ref.stdout == "hello" || len(ref.stderr) == 0) {
				t.Errorf("reference: a required plugin's %s failure did not stop the task: %+v", tc.fail, *ref)
			}
			if fmt.Sprint(ref) != fmt.Sprint(sut) {
				t.Errorf("differs:\nreference:  %+v\nunder test: %+v", *ref, *sut)
			}
		})
	}
}

// spankPluginDir is BuildSpankPlugin's directory in srun's messages.
var spankPluginDir = regexp.MustCompile(`/tmp/ti-spank-[^/ ]+/`)

// logStamp is the "[<time>] " that starts 26.05's step manager lines.
var logStamp = regexp.MustCompile(`^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] `)

// spankFail runs `srun -n1 echo hello` as the user on the first node and returns
// how it ended; i numbers the job name.
func spankFail(t *testing.T, c *cluster.Cluster, i int) *spankFailRun {
	name := fmt.Sprintf("spank-fail-%d", i)
	r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{
		User: cluster.TestUser, Dir: c.WorkDir(t, cluster.TestUser), CleanEnv: true,
		Args: []string{"srun", "-N1", "-n1", "-w", node(c, 0), "--job-name=" + name, "/bin/echo", "hello"},
	}, Timeout: spankSrunTimeout})
	if r.Err != nil {
		t.Fatalf("%v", r)
	}
	run := &spankFailRun{rc: r.ExitCode, stdout: strings.TrimSpace(r.Stdout)}
	words := map[string]string{}
	for id, f := range c.AllJobs(t) {
		if f["JobName"] == name {
			f = c.WaitJob(t, id, shortJobTimeout, cluster.JobTerminalStates...)
			run.jobState = f["JobState"] + " " + f["ExitCode"] + " " + f["Reason"]
			words[id] = "<JOB>"
		}
	}
	norm := normalizer(c, words)
	for _, l := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		// srun's own messages and slurmstepd's forwarded ones interleave in any
		// order (sorted below); whether slurmstepd still writes to the exec gate
		// of a task that already died is a race.
		if l != "" && !strings.Contains(l, " to unblock task ") {
			l = logStamp.ReplaceAllString(l, "[<TIME>] ") // 26.05's step manager lines
			run.stderr = append(run.stderr, spankPluginDir.ReplaceAllString(norm(l), "<PLUGINDIR>/"))
		}
	}
	sort.Strings(run.stderr)
	return run
}

// TestSpank_PBS: Debian's spank_pbs.so (the release's own, by its path inside the
// root) sets PBS_* variables in user_init; a task sees the same ones on both
// clusters.
func TestSpank_PBS(t *testing.T) {
	pbs := cluster.StockSpankPlugin(t, "", "spank_pbs.so")
	p := startPair(t, func(impl string) cluster.Options {
		o := batchOptions(impl)
		o.PlugStack = "required " + pbs + "\n"
		return o
	})
	got := make([][]string, 2)
	var subs []subtest
	for i, c := range p.both() {
		subs = append(subs, subtest{p.label(c), func(t *testing.T) {
			work := c.WorkDir(t, cluster.TestUser)
			r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{
				User: cluster.TestUser, Dir: work, CleanEnv: true,
				Args: []string{"srun", "-N1", "-n1", "-w", node(c, 0), "--job-name=spank-pbs", "/bin/sh", "-c", `env; echo "job=$SLURM_JOB_ID"`},
			}, Timeout: spankSrunTimeout})
			if r.Err != nil || r.ExitCode != 0 {
				t.Fatalf("%v\nstderr: %s", r, r.Stderr)
			}
			var job string
			var pbsVars []string
			for _, l := range strings.Split(r.Stdout, "\n") {
				if v, ok := strings.CutPrefix(l, "job="); ok {
					job = v
				} else if strings.HasPrefix(l, "PBS_") {
					pbsVars = append(pbsVars, l)
				}
			}
			norm := normalizer(c, map[string]string{job: "<JOB>"})
			for i := range pbsVars {
				pbsVars[i] = norm(pbsVars[i])
			}
			sort.Strings(pbsVars)
			got[i] = pbsVars
		}})
	}
	concurrently(t, subs...)
	ref, sut := got[0], got[1]
	t.Logf("reference PBS_* variables: %q", ref)
	if len(ref) == 0 {
		t.Errorf("reference: the task saw no PBS_* variable")
	}
	compareLines(t, "PBS_* variables of the task", ref, sut)
}

// nsjoinTaskCmd is what each task of TestSpank_NSJoin runs: its rank, hostname,
// the container the plugin joined and its own UTS and user namespaces.
const nsjoinTaskCmd = `echo $SLURM_PROCID $(hostname) $NSJOIN_CONTAINER $(readlink /proc/self/ns/uts) $(readlink /proc/self/ns/user)`

// nsjoinRun is what one cluster showed in TestSpank_NSJoin, normalized.
type nsjoinRun struct {
	rc  int
	out []string // "<rank> nsjoin-<JOB> <PID> <UTS> <USER>", sorted
}

// TestSpank_NSJoin: the fixture spank/test/nsjoin.c does what pyxis does
// (spank-ckpt.md §1.7) without enroot: user_init forks a "container" process in
// new user and UTS namespaces (hostname nsjoin-<jobid>), and each task's
// task_init joins them with setns(2), which only a single-threaded task child of
// the user_init process can do. On both clusters, both tasks of a two-task step
// must run in the container's namespaces (not the host's) with its hostname and
// NSJOIN_CONTAINER set; the normalized outputs must be the same.
//
// Host release only (22.05): in a chroot release (24.11, 26.05) every Slurm
// process runs chrooted, and unshare(CLONE_NEWUSER) fails with EPERM for a
// chrooted caller (unshare(2)), on either cluster.
func TestSpank_NSJoin(t *testing.T) {
	if rel, err := cluster.SelectedRelease(); err != nil {
		t.Fatalf("%v", err)
	} else if rel.Root() != "" {
		// scripts/integration.sh lists it for 22.05 only.
		t.Fatalf("Slurm %s runs chrooted (%s): unshare(CLONE_NEWUSER) is EPERM there; run with TIEE_SLURM_RELEASE=22.05", rel.Name, rel.Root())
	}
	src := filepath.Join(filepath.Dir(traceSource(t)), "nsjoin.c")
	so := cluster.BuildSpankPlugin(t, "", src)
	// The host's namespaces: init's, or (where this sandbox hides init's) the
	// test's own, which the clusters' daemons inherit (they unshare only mounts).
	hostNS := map[string]string{}
	for _, ns := range []string{"uts", "user"} {
		l, err := os.Readlink("/proc/1/ns/" + ns)
		if err != nil {
			l, err = os.Readlink("/proc/self/ns/" + ns)
		}
		if err != nil {
			t.Fatalf("%v", err)
		}
		hostNS[ns] = l
	}
	t.Logf("host namespaces: %v", hostNS)
	p := startPair(t, func(impl string) cluster.Options {
		o := batchOptions(impl)
		o.PlugStack = "required " + so + "\n"
		return o
	})
	runs := make([]*nsjoinRun, 2)
	var subs []subtest
	for i, c := range p.both() {
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { runs[i] = spankNSJoin(t, c, hostNS) }})
	}
	concurrently(t, subs...)
	ref, sut := runs[0], runs[1]
	if ref == nil || sut == nil {
		t.Fatal("a cluster did not finish its run")
	}
	t.Logf("reference: rc=%d output=%q", ref.rc, ref.out)
	if fmt.Sprint(ref) != fmt.Sprint(sut) {
		t.Errorf("differs:\nreference:  %+v\nunder test: %+v", *ref, *sut)
	}
}

// spankNSJoin runs one cluster's part of TestSpank_NSJoin: the two-task srun as
// the user on the first node; it checks the tasks' lines against the container
// and the host's namespaces hostNS (name -> readlink of /proc/<pid>/ns/<name>) and
// returns them normalized.
func spankNSJoin(t *testing.T, c *cluster.Cluster, hostNS map[string]string) *nsjoinRun {
	const name = "spank-nsjoin"
	r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{
		User: cluster.TestUser, Dir: c.WorkDir(t, cluster.TestUser), CleanEnv: true,
		Args: []string{"srun", "-N1", "-n2", "-w", node(c, 0), "--job-name=" + name, "/bin/sh", "-c", nsjoinTaskCmd},
	}, Timeout: spankSrunTimeout})
	if r.Err != nil {
		t.Fatalf("%v", r)
	}
	job := ""
	for id, f := range c.AllJobs(t) {
		if f["JobName"] == name {
			job = id
			c.WaitJob(t, id, shortJobTimeout, cluster.JobTerminalStates...)
		}
	}
	if job == "" {
		t.Fatalf("no job named %s; srun: %v\nstderr: %s", name, r, r.Stderr)
	}
	run := &nsjoinRun{rc: r.ExitCode}
	t.Logf("job %s: rc=%d stdout=%q stderr=%q", job, r.ExitCode, r.Stdout, r.Stderr)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.ExitCode != 0 || len(lines) != 2 {
		t.Errorf("srun: rc=%d, want 0 and two lines: %q\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
	}
	first := map[int]string{} // field -> first task's value
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Errorf("task line %q: want rank, hostname, NSJOIN_CONTAINER, uts and user namespaces", l)
			run.out = append(run.out, l)
			continue
		}
		if want := "nsjoin-" + job; f[1] != want {
			t.Errorf("task %s: hostname %q, want %q", f[0], f[1], want)
		}
		if pid, err := strconv.Atoi(f[2]); err != nil || pid <= 0 {
			t.Errorf("task %s: NSJOIN_CONTAINER=%q, want a pid", f[0], f[2])
		}
		for k, ns := range map[int]string{3: "uts", 4: "user"} {
			if !strings.HasPrefix(f[k], ns+":[") {
				t.Errorf("task %s: %s namespace %q", f[0], ns, f[k])
			}
			if f[k] == hostNS[ns] {
				t.Errorf("task %s: %s namespace %s is the host's", f[0], ns, f[k])
			}
		}
		for k := 2; k <= 4; k++ {
			if v, ok := first[k]; !ok {
				first[k] = f[k]
			} else if v != f[k] {
				t.Errorf("the tasks differ in field %d (container, uts, user): %q and %q", k, v, f[k])
			}
		}
		f[1] = strings.ReplaceAll(f[1], job, "<JOB>")
		f[2], f[3], f[4] = "<PID>", "uts:<NS>", "user:<NS>"
		run.out = append(run.out, strings.Join(f, " "))
	}
	sort.Strings(run.out)
	// The exit hook kills the container (the nodes share the test's pid
	// namespace).
	if pid, err := strconv.Atoi(first[2]); err == nil && pid > 0 {
		for deadline := time.Now().Add(spankTraceTimeout); ; time.Sleep(filePoll) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("container process %d still runs %v after the job", pid, spankTraceTimeout)
				break
			}
		}
	}
	return run
}

// TestSpank_Extern: with PrologFlags=Contain the job's extern step runs the remote
// stack too: init, the options, init_post_opt, task_post_fork with no task (task
// items ESPANK_NOT_TASK) and exit, as root, and no user_init or task_init*
// (spank-ckpt.md §1.2). The traces of a one-task srun job, extern step included,
// are the same on both implementations.
func TestSpank_Extern(t *testing.T) {
	so := cluster.BuildSpankPlugin(t, "", traceSource(t))
	var dirs []string
	p := startPair(t, func(impl string) cluster.Options {
		o := batchOptions(impl)
		o.ExtraConf = append(o.ExtraConf, "PrologFlags=Contain")
		d := traceDir(t)
		dirs = append(dirs, d)
		o.PlugStack = fmt.Sprintf("required %s trace=%s\n", so, d)
		return o
	})
	dir := map[*cluster.Cluster]string{p.ref: dirs[0], p.sut: dirs[1]}
	traces := make([][]string, 2)
	// From 24.11 the extern step runs exit with the job's gid as egid or with 0, run
	// by run (measured: two stock clusters disagree): another thread of its
	// step manager changes the process's egid meanwhile. Not compared.
	racyEgid := regexp.MustCompile(`^(hook=exit ctx=remote .* egid=)\d+( .* S_JOB_STEPID=4294967292 )`)
	var subs []subtest
	for i, c := range p.both() {
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { traces[i] = spankExternTrace(t, c, dir[c]) }})
	}
	concurrently(t, subs...)
	ref, sut := traces[0], traces[1]
	if p.ref.Release != "22.05" {
		for _, tr := range [][]string{ref, sut} {
			for i, l := range tr {
				tr[i] = racyEgid.ReplaceAllString(l, "${1}<racy>${2}")
			}
		}
	}
	all := strings.Join(ref, "\n")
	for _, re := range []string{
		`(?m)^== remote .* step=4294967292 `,
		`(?m)^hook=task_post_fork ctx=remote remote=1 role=main .* uid=0 euid=0 .* S_JOB_STEPID=4294967292 .* S_TASK_ID=!Not in task context`,
		`(?m)^hook=exit ctx=remote remote=1 role=main .* S_JOB_STEPID=4294967292 `,
	} {
		if !regexp.MustCompile(re).MatchString(all) {
			t.Errorf("reference trace has no line matching %s:\n%s", re, all)
		}
	}
	if regexp.MustCompile(`(?m)^hook=(user_init|task_init\w*) .* S_JOB_STEPID=4294967292 `).MatchString(all) {
		t.Errorf("reference: the extern step ran user_init or task_init*:\n%s", all)
	}
	compareLines(t, "SPANK trace with the extern step", ref, sut)
}

// spankExternTrace runs a one-task srun job on the first node and returns the
// normalized traces once the extern step's exit hook and the job_epilog are in.
func spankExternTrace(t *testing.T, c *cluster.Cluster, dir string) []string {
	work := c.WorkDir(t, cluster.TestUser, "spank-extern")
	r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{
		User: cluster.TestUser, Dir: work, CleanEnv: true, Env: traceEnv("srun"),
		Args: []string{"srun", "-N1", "-n1", "-w", node(c, 0), "--job-name=spank-extern", "/bin/sh", "-c", `echo "job=$SLURM_JOB_ID"`},
	}, Timeout: spankSrunTimeout})
	if r.Err != nil || r.ExitCode != 0 {
		t.Fatalf("srun: %v\nstderr: %s", r, r.Stderr)
	}
	job := strings.TrimPrefix(strings.TrimSpace(r.Stdout), "job=")
	c.WaitJob(t, job, shortJobTimeout, cluster.JobTerminalStates...)
	ex := regexp.MustCompile(`(?m)^hook=exit ctx=remote .* S_JOB_ID=` + job + ` S_JOB_STEPID=4294967292 `)
	ep := regexp.MustCompile(`(?m)^hook=job_epilog .* S_JOB_ID=` + job + ` `)
	for deadline := time.Now().Add(spankTraceTimeout); ; time.Sleep(filePoll) {
		all := readTraces(t, dir)
		if ex.MatchString(all) && ep.MatchString(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("job %s: no extern step exit hook and job_epilog traced after %v", job, spankTraceTimeout)
			break
		}
	}
	words := normalizer(c, map[string]string{job: "<JOB>"})
	return traceBlocks(t, dir, func(s string) string { return spoolJobDir.ReplaceAllString(words(s), "${1}<ID>/") })
}
