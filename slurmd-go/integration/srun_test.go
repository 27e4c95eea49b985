//go:build integration

// srun end to end: interactive steps (srun, srun inside sbatch, srun --pty, sattach,
// sstat) run on the nodes of the daemon under test (TIEE_SLURMD_IMPL) as on the stock
// slurmd. As in batch_test.go, TestSrun starts the reference cluster (stock slurmd)
// and the cluster under test, runs the same commands on both at the same time and
// compares what srun prints and returns, normalized (job ids, node names, cluster
// name, directories, ports), and against concrete values measured on the stock
// daemon.
//
// Configuration: batchOptions without Prolog/Epilog (proctrack/cgroup, so that a
// killed step leaves no process; KillWait=3) plus the partition "srun" with
// OverSubscribe=FORCE: every cluster has 4 nodes of this machine's 2 CPUs, and
// `srun -N4 -n8` needs all 8, so without oversubscription the concurrent subtests
// would queue behind each other.
//
// Load: the subtests run concurrently, but at most maxSrunsPerCluster of the test's
// own sruns at once per cluster, and the two heavy ones (20 concurrent steps, 100 MiB
// through srun) alone afterwards: beyond that the stock slurmd answered launches
// after MessageTimeout on this machine.
//
// Every srun, sattach and expect runs in its own process group, bounded by a named
// timeout after which it is SIGKILLed (cluster.BgCmd); a daemon that never answers
// fails the subtest, it never blocks the test binary.
//
// Run alone: sudo TIEE_SLURMD_IMPL=stock go test -tags integration -count=1 -v
// -run TestSrun ./slurmd-go/integration/ (about 40 s on the stock daemon).
package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named bounds and values of the srun tests.
const (
	srunTimeout         = 60 * time.Second        // one short srun: allocation, launch, tasks, exit
	srunBulkTimeout     = 150 * time.Second       // bulkSize through srun (stock: ~5 s alone, ~15 s under load)
	srunJobTimeout      = 90 * time.Second        // a batch job that runs steps is COMPLETED
	stepRunTimeout      = 60 * time.Second        // a background srun's task runs (it may wait for its allocation meanwhile)
	sigintExitTimeout   = 20 * time.Second        // srun ends after the second SIGINT (stock: at once)
	taskGoneTimeout     = 30 * time.Second        // no process of an ended step is left
	bgStepTimeout       = 2 * time.Minute         // a background srun: stepRunTimeout plus what the test does meanwhile
	ptyTimeout          = 2 * time.Minute         // the whole expect session
	expectStartTime     = 60                      // seconds for the first prompt (srun may wait for its allocation)
	expectStepTimeout   = 20                      // seconds, each later step of the expect script
	sigintGap           = 200 * time.Millisecond  // Ctrl-C Ctrl-C: srun aborts on a second SIGINT within 1 s
	procPoll            = 100 * time.Millisecond  // polling for processes and output
	bulkSize            = 100 << 20               // bytes through srun's stdin and stdout
	bulkSeed            = "srun-bulk-stream-seed" // 32 bytes: the ChaCha8 seed of the stream
	unbufferedGap       = 4 * time.Second         // between the two halves of a line (testSrunBuffering)
	stallAt             = 1 << 20                 // srun's stdout is left unread after this many bytes...
	stallQuiet          = 2 * time.Second         // ...until srun has taken no stdin for this long...
	stallPlateauTimeout = 60 * time.Second        // ...or this long has passed
	stallStepdRSS       = 32 << 20                // the step manager's memory meanwhile (bytes; ~7 MiB idle)
	concurrentSteps     = 20                      // steps at once in one job

	srunPartition = "srun"
)

// srunEnvNondeterministic are the task variables whose values differ between two
// runs of the same step on the same cluster.
var srunEnvNondeterministic = []string{"SLURM_TASK_PID", "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT"}

func srunOptions(impl string) cluster.Options {
	o := batchOptions(impl)
	// No Prolog/Epilog: without PrologFlags=Alloc the first launch on a node runs the
	// Prolog before it answers srun, which under this suite's load on 2 CPUs took
	// longer than MessageTimeout ("Task launch ... Socket timed out").
	o.Prolog, o.Epilog = "", ""
	o.ExtraConf = append(o.ExtraConf,
		"PartitionName="+srunPartition+" Nodes=ALL OverSubscribe=FORCE:64 MaxTime=INFINITE State=UP")
	return o
}

// TestSrun is the srun acceptance suite on one pair of clusters.
func TestSrun(t *testing.T) {
	p := startPair(t, tmpFSOptions(t, srunOptions))
	concurrently(t,
		subtest{"TmpFSPerNode", func(t *testing.T) { testTmpFSPerNode(t, p) }},
		subtest{"TaskEpilogBound", func(t *testing.T) { testSrunTaskEpilogBound(t, p) }},
		subtest{"root", func(t *testing.T) { testSrunAsUser(t, p, "root") }},
		subtest{cluster.TestUser, func(t *testing.T) { testSrunAsUser(t, p, cluster.TestUser) }},
		subtest{"BatchStep4Nodes", func(t *testing.T) { testSrunBatchStep(t, p) }},
		subtest{"Sigint", func(t *testing.T) { testSrunSigint(t, p) }},
		subtest{"SattachSstat", func(t *testing.T) { testSrunSattach(t, p) }},
		subtest{"KillOnBadExit", func(t *testing.T) { testSrunKillOnBadExit(t, p) }},
		subtest{"TimeLimit", func(t *testing.T) { testSrunTimeLimit(t, p) }},
		subtest{"Buffering", func(t *testing.T) { testSrunBuffering(t, p) }},
		subtest{"MPIPlugin", func(t *testing.T) { testSrunMPIPlugin(t, p) }},
		subtest{"SlurmdDebug", func(t *testing.T) { testSrunSlurmdDebug(t, p) }},
		subtest{"DebuggerTest", func(t *testing.T) { testSrunDebuggerTest(t, p) }},
	)
	// Alone, each: 2x20 steps starting at once, and two 100 MiB streams, keep this
	// machine's 2 CPUs so busy that step launches beside them time out
	// (MessageTimeout: "Task launch ... Socket timed out").
	t.Run("ConcurrentSteps", func(t *testing.T) { testSrunConcurrentSteps(t, p) })
	t.Run("StdinBulk", func(t *testing.T) { testSrunStdinBulk(t, p) })
}

// testSrunAsUser: the cases every user must get the same way.
func testSrunAsUser(t *testing.T, p pair, user string) {
	concurrently(t,
		subtest{"Label", func(t *testing.T) { testSrunLabel(t, p, user) }},
		subtest{"Environment", func(t *testing.T) { testSrunEnv(t, p, user) }},
		subtest{"ExitCode", func(t *testing.T) { testSrunExitCode(t, p, user) }},
		subtest{"PathSearch", func(t *testing.T) { testSrunPathSearch(t, p, user) }},
		subtest{"MissingWorkDir", func(t *testing.T) { testSrunMissingWorkDir(t, p, user) }},
		subtest{"KilledBySignal", func(t *testing.T) { testSrunKilled(t, p, user) }},
		subtest{"Stdin", func(t *testing.T) { testSrunStdin(t, p, user) }},
		subtest{"Pty", func(t *testing.T) { testSrunPty(t, p, user) }},
		subtest{"PtyTwoTasks", func(t *testing.T) { testSrunPtyTwoTasks(t, p, user) }},
		subtest{"TaskScripts", func(t *testing.T) { testSrunTaskScripts(t, p, user) }},
		subtest{"MultiProg", func(t *testing.T) { testSrunMultiProg(t, p, user) }},
		subtest{"LabelledFiles", func(t *testing.T) { testSrunLabelledFiles(t, p, user) }},
		subtest{"FilePatterns", func(t *testing.T) { testSrunFilePatterns(t, p, user) }},
		subtest{"LeaderExitsFirst", func(t *testing.T) { testSrunLeaderExitsFirst(t, p, user) }},
		subtest{"Descriptors", func(t *testing.T) { testSrunDescriptors(t, p, user) }},
	)
}

// srunCmd is `srun -p srun args...` as user in dir with a clean environment.
func srunCmd(user, dir string, timeout time.Duration, args ...string) cluster.BgCmd {
	return cluster.BgCmd{
		Cmd:     cluster.Cmd{User: user, Dir: dir, CleanEnv: true, Args: append([]string{"srun", "-p", srunPartition}, args...)},
		Timeout: timeout,
	}
}

// srunWith runs srunCmd with stdin in one of c's slots, bounded by srunTimeout.
// Any goroutine.
func srunWith(t *testing.T, c *cluster.Cluster, user, dir, stdin string, args ...string) cluster.Result {
	bc := srunCmd(user, dir, srunTimeout, args...)
	bc.Stdin = stdin
	return withSlot(c, func() cluster.Result { return c.RunClient(t, bc) })
}

// maxSrunsPerCluster bounds the sruns the test runs at once on one cluster: with
// all of them at once (about 15 per cluster) the stock slurmd on this machine's
// 2 CPUs answered some launches after MessageTimeout.
const maxSrunsPerCluster = 4

var (
	slotsMu sync.Mutex
	slots   = map[*cluster.Cluster]chan struct{}{} // guarded by slotsMu
)

// withSlot runs f while it holds one of c's maxSrunsPerCluster slots. The wait for
// a slot is bounded by the holders' own timeouts; each cluster has its own slots,
// so a hanging cluster under test never delays the reference.
func withSlot[T any](c *cluster.Cluster, f func() T) T {
	slotsMu.Lock()
	s := slots[c]
	if s == nil {
		s = make(chan struct{}, maxSrunsPerCluster)
		slots[c] = s
	}
	slotsMu.Unlock()
	s <- struct{}{}
	defer func() { <-s }()
	return f()
}

// onBoth runs f for the reference and for the cluster under test at the same time.
// f must not call t.Fatal (it runs in other goroutines).
func onBoth[T any](p pair, f func(c *cluster.Cluster) T) (ref, sut T) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ref = f(p.ref) }()
	go func() { defer wg.Done(); sut = f(p.sut) }()
	wg.Wait()
	return ref, sut
}

// workDirs is WorkDir(user, "srun", sub) on both clusters.
func workDirs(t *testing.T, p pair, user, sub string) map[*cluster.Cluster]string {
	t.Helper()
	return map[*cluster.Cluster]string{p.ref: p.ref.WorkDir(t, user, "srun", sub), p.sut: p.sut.WorkDir(t, user, "srun", sub)}
}

// ended fails the test unless the command ran to its end (not timed out, started).
func ended(t *testing.T, p pair, c *cluster.Cluster, r cluster.Result) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", p.label(c), r)
	}
}

// wantExit checks the exit status on both clusters: want, and the same on both.
func wantExit(t *testing.T, p pair, ref, sut cluster.Result, want int) {
	t.Helper()
	ended(t, p, p.ref, ref)
	ended(t, p, p.sut, sut)
	if ref.ExitCode != want {
		t.Errorf("%s: exit status %d, want %d (the stock slurmd's behaviour changed?): %v", p.label(p.ref), ref.ExitCode, want, ref)
	}
	if sut.ExitCode != want {
		t.Errorf("%s: exit status %d, want %d as on the stock daemon: %v", p.label(p.sut), sut.ExitCode, want, sut)
	}
}

// testSrunPathSearch: a bare command is looked up in the task's PATH as the
// job's user (slurmstepd's _build_path runs after _become_user): a PATH entry
// the user cannot search is passed over. The first entry is a directory only
// root may enter, with a `true` there that exits 7: root runs that one, the
// ordinary user /usr/bin/true. srun itself sends the bare name (it searches
// PATH only for --test-exec and --bcast).
func testSrunPathSearch(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "path")
	bins := map[*cluster.Cluster]string{}
	for _, c := range p.both() {
		bin := filepath.Join(c.Dir, "rootonly-bin-"+user)
		if err := os.Mkdir(bin, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "true"), []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[c] = bin
	}
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		bc := srunCmd(user, dirs[c], srunTimeout, "-n1", "-w", node(c, 0), "true")
		bc.Env = []string{"PATH=" + bins[c] + ":" + cluster.CleanPath} // srun's own, which the task inherits
		return withSlot(c, func() cluster.Result { return c.RunClient(t, bc) })
	})
	want := 0
	if user == "root" {
		want = 7
	}
	wantExit(t, p, ref, sut, want)
}

// stepIDRe matches the job part of a step id in srun's messages ("StepId=6618.0"),
// for runs whose job id the test does not know.
var stepIDRe = regexp.MustCompile(`StepId=[0-9]+`)

// srunQueuedRe matches srun's lines about a pending allocation: slurmctld's
// scheduling (a new job waits while an earlier one is pending, until the next
// scheduler pass), not the node daemon's doing.
var srunQueuedRe = regexp.MustCompile(`(?m)^srun: job [0-9]+ (queued and waiting for resources|has been allocated resources)\n`)

// srunNormalizer is normalizer(c, words) that also replaces the job of every
// StepId= and drops the srunQueuedRe lines.
func srunNormalizer(c *cluster.Cluster, words map[string]string) func(string) string {
	n := normalizer(c, words)
	return func(s string) string {
		return n(stepIDRe.ReplaceAllString(srunQueuedRe.ReplaceAllString(s, ""), "StepId=<JOB>"))
	}
}

// sortedLines splits s into its non-empty lines, sorted: tasks print in any order.
func sortedLines(s string) []string {
	var l []string
	for _, line := range strings.Split(s, "\n") {
		if line != "" {
			l = append(l, line)
		}
	}
	slices.Sort(l)
	return l
}

// srunIORace is what srun prints when a node's I/O connection is accepted after srun,
// on a task killed by a signal, already gave up on every node's I/O (step_io.c
// _read_io_init_msg after client_io_handler_abort): a race between srun's own message
// and I/O threads, seen on stock slurmd under CPU load; it says nothing of the daemon.
var srunIORace = regexp.MustCompile(`^srun: error: IO: Hey, you told me node [0-9]+ was down!$`)

// srunTeardownRace is 26.05 srun aborting in its own teardown: a thread still
// holds the step launch lock when srun destroys it (step_launch.c
// step_launch_state_destroy, slurm_mutex_destroy's EBUSY is fatal, and srun
// dies of SIGABRT). Seen on the stock slurmd when a step is killed by a
// restarting node; the step's outcome is already decided by then.
var srunTeardownRace = regexp.MustCompile(`^srun: fatal: step_launch_state_destroy: pthread_mutex_destroy\(\): Device or resource busy$`)

// srunAborted reports whether srun died of srunTeardownRace.
func srunAborted(r cluster.Result) bool {
	for _, l := range strings.Split(r.Stderr, "\n") {
		if srunTeardownRace.MatchString(l) {
			return true
		}
	}
	return false
}

// dropSrunRaces removes srunIORace and srunTeardownRace lines, logging each
// so that a run shows them.
func dropSrunRaces(t *testing.T, label string, lines []string) []string {
	t.Helper()
	return slices.DeleteFunc(lines, func(l string) bool {
		if srunIORace.MatchString(l) || srunTeardownRace.MatchString(l) {
			t.Logf("%s: srun's own I/O race, not compared: %q", label, l)
			return true
		}
		return false
	})
}

// sameLines checks that the sorted, normalized lines of ref and sut are want (if
// non-nil) and equal to each other.
func sameLines(t *testing.T, p pair, what, ref, sut string, want []string) {
	t.Helper()
	nr := dropSrunRaces(t, p.label(p.ref), sortedLines(srunNormalizer(p.ref, nil)(ref)))
	ns := dropSrunRaces(t, p.label(p.sut), sortedLines(srunNormalizer(p.sut, nil)(sut)))
	if want != nil {
		slices.Sort(want)
		if !slices.Equal(nr, want) {
			t.Errorf("%s on %s: lines (sorted, normalized)\n  %q\nwant\n  %q (the stock slurmd's behaviour changed?)", what, p.label(p.ref), nr, want)
		}
		if !slices.Equal(ns, want) {
			t.Errorf("%s on %s: lines (sorted, normalized)\n  %q\nwant\n  %q", what, p.label(p.sut), ns, want)
		}
	}
	if !slices.Equal(nr, ns) {
		t.Errorf("%s differs (sorted, normalized):\nreference:\n  %q\nunder test:\n  %q", what, nr, ns)
	}
}

// poll calls cond every procPoll until it is true (true) or timeout has passed (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(procPoll)
	}
}

// labelCmd prints what tells the tasks apart although every node is this host.
const labelCmd = `echo $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME`

// testSrunLabel: `srun -N4 -n8 --label` runs two tasks on each node (block
// distribution) and prefixes each line with the task id.
func testSrunLabel(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "label")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-N4", "-n8", "--label", "sh", "-c", labelCmd)
	})
	wantExit(t, p, ref, sut, 0)
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprintf("%d: %d %d %d <NODE>%d", i, i, i%2, i/2, i/2+1))
	}
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, want)
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, []string{})
}

// labelledEnvRe is one line of `srun --label env`.
var labelledEnvRe = regexp.MustCompile(`^ *([0-9]+): ([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// parseLabelledEnv parses `srun --label env` into task id -> environment.
func parseLabelledEnv(out string) map[int]map[string]string {
	envs := map[int]map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		m := labelledEnvRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id, _ := strconv.Atoi(m[1])
		if envs[id] == nil {
			envs[id] = map[string]string{}
		}
		envs[id][m[2]] = m[3]
	}
	return envs
}

// testSrunEnv: every task of `srun -N4 -n8` has the stock environment (variable
// names; values after normalization), and the step's concrete values.
func testSrunEnv(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "env")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-N4", "-n8", "--label", "env")
	})
	wantExit(t, p, ref, sut, 0)
	outs := map[*cluster.Cluster]string{p.ref: ref.Stdout, p.sut: sut.Stdout}
	envs := map[*cluster.Cluster]map[int]map[string]string{}
	norms := map[*cluster.Cluster]func(string) string{}
	for _, c := range p.both() {
		e := parseLabelledEnv(outs[c])
		envs[c] = e
		if len(e) != 8 {
			t.Fatalf("%s: environments of %d tasks, want 8:\n%s", p.label(c), len(e), clipOut(outs[c]))
		}
		job := e[0]["SLURM_JOB_ID"]
		norms[c] = normalizer(c, map[string]string{job: "<JOB>"})
		for i := range 8 {
			for k, want := range map[string]string{
				"SLURM_PROCID":         strconv.Itoa(i),
				"SLURM_LOCALID":        strconv.Itoa(i % 2),
				"SLURM_NODEID":         strconv.Itoa(i / 2),
				"SLURMD_NODENAME":      node(c, i/2),
				"SLURM_JOB_ID":         job,
				"SLURM_STEP_ID":        "0",
				"SLURM_NTASKS":         "8",
				"SLURM_STEP_NUM_TASKS": "8",
				"SLURM_STEP_NUM_NODES": "4",
				"SLURM_JOB_USER":       user,
				"SLURM_JOB_PARTITION":  srunPartition,
				"SLURM_CLUSTER_NAME":   c.Name,
				"SLURM_SUBMIT_DIR":     dirs[c],
				"SLURM_CONF":           c.ConfPath,
			} {
				if got := e[i][k]; got != want {
					t.Errorf("%s: task %d: %s=%q, want %q", p.label(c), i, k, got, want)
				}
			}
			if factsOf(t, c).jobTimesInEnv {
				// srun's own job, without a time limit.
				if span, ok := jobTimeSpan(e[i]); !ok || span != unlimitedSpan {
					t.Errorf("%s: task %d: %s - %s = %v (valid %v), want %v", p.label(c), i, jobTimeVars[1], jobTimeVars[0], span, ok, unlimitedSpan)
				}
			}
		}
	}
	for i := range 8 {
		compareEnv(t, fmt.Sprintf("task %d", i), envs[p.ref][i], envs[p.sut][i], norms[p.ref], norms[p.sut], srunEnvNondeterministic...)
	}
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, []string{})
}

// clipOut keeps failure messages short.
func clipOut(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// timedWriter records when each piece of srun's stdout arrived.
type timedWriter struct {
	mu     sync.Mutex
	text   strings.Builder
	firsts map[string]time.Time // a watched word -> when it first arrived
	watch  []string
}

func (w *timedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(b)
	for _, word := range w.watch {
		if _, ok := w.firsts[word]; !ok && strings.Contains(w.text.String(), word) {
			w.firsts[word] = time.Now()
		}
	}
	return len(b), nil
}

// testSrunBuffering: a task prints a word without a newline, then the rest of the
// line unbufferedGap later. By default (LAUNCH_BUFFERED_IO) the step manager holds
// the partial line, so srun prints both at once; with -u it passes the word on at
// once. Both daemons, same output.
func testSrunBuffering(t *testing.T, p pair) {
	dirs := workDirs(t, p, "root", "buffering")
	script := fmt.Sprintf("printf head; sleep %d; echo ' tail'", int(unbufferedGap/time.Second))
	for _, mode := range []struct {
		name     string
		args     []string
		separate bool // head arrives well before tail
	}{{"buffered", nil, false}, {"unbuffered", []string{"-u"}, true}} {
		type run struct {
			r   cluster.Result
			gap time.Duration
			ok  bool
		}
		ref, sut := onBoth(p, func(c *cluster.Cluster) run {
			w := &timedWriter{firsts: map[string]time.Time{}, watch: []string{"head", "tail"}}
			args := append(append([]string{"-n1", "-w", node(c, 0)}, mode.args...), "bash", "-c", script)
			bc := srunCmd("root", dirs[c], srunTimeout, args...)
			bc.Stdout = w
			r := withSlot(c, func() cluster.Result { return c.RunClient(t, bc) })
			w.mu.Lock()
			defer w.mu.Unlock()
			r.Stdout = w.text.String()
			h, okh := w.firsts["head"]
			tl, okt := w.firsts["tail"]
			return run{r, tl.Sub(h), okh && okt}
		})
		wantExit(t, p, ref.r, sut.r, 0)
		sameLines(t, p, mode.name+" stdout", ref.r.Stdout, sut.r.Stdout, []string{"head tail"})
		for _, x := range []struct {
			c *cluster.Cluster
			r run
		}{{p.ref, ref}, {p.sut, sut}} {
			t.Logf("%s: %s: 'tail' printed %v after 'head'", p.label(x.c), mode.name, x.r.gap.Round(time.Millisecond))
			if !x.r.ok {
				continue // the output check above reports it
			}
			if separate := x.r.gap >= unbufferedGap/2; separate != mode.separate {
				t.Errorf("%s: %s: 'tail' came %v after 'head', want %s", p.label(x.c), mode.name, x.r.gap,
					map[bool]string{true: "the partial line passed on at once", false: "the line held until its end"}[mode.separate])
			}
		}
	}
}

// testSrunMPIPlugin: `srun --mpi=pmi2` runs a task that does not use PMI as on stock
// (output and exit), with the PMI variables of mpi/pmi2's step manager side.
func testSrunMPIPlugin(t *testing.T, p pair) {
	dirs := workDirs(t, p, "root", "mpi")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, "root", dirs[c], "", "--mpi=pmi2", "-n1", "-w", node(c, 0), "sh", "-c",
			`echo rank $SLURM_PROCID pmi $PMI_RANK $PMI_SIZE fd ${PMI_FD:+set} port ${SLURM_PMI2_SRUN_PORT:-unset}`)
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{"rank 0 pmi 0 1 fd set port unset"})
}

// testSrunExitCode: srun returns the task's exit status and reports it on stderr.
func testSrunExitCode(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "exit")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-n1", "-w", node(c, 0), "sh", "-c", "exit 3")
	})
	wantExit(t, p, ref, sut, 3)
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, []string{"srun: error: <NODE>1: task 0: Exited with exit code 3"})
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{})
}

// stepdTimeRe is the timestamp 26.05's step manager puts before its lines on the
// job's stderr ("[2026-12-01T13:45:05.123] error: ...").
var stepdTimeRe = regexp.MustCompile(`(?m)^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] `)

// testSrunMissingWorkDir: --chdir to a directory that does not exist: the task
// runs in /tmp, and the step manager says so twice on srun's stderr (its own
// chdir as the user in _fork_all_tasks, then the task's), as stock does.
func testSrunMissingWorkDir(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "nowd")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-n1", "-w", node(c, 0), "--chdir="+dirs[c]+"/missing", "pwd")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{"/tmp"})
	strip := func(s string) string { return stepdTimeRe.ReplaceAllString(s, "<TIME> ") }
	sameLines(t, p, "stderr", strip(ref.Stderr), strip(sut.Stderr), nil)
	if n := strings.Count(sut.Stderr, "couldn't chdir to `"); n != 2 {
		t.Errorf("%s: %d chdir error lines, want 2 (step manager and task): %q", p.label(p.sut), n, sut.Stderr)
	}
}

// testSrunKilled: a task that dies of SIGKILL: srun exits 128+9 with the stock
// message lines.
func testSrunKilled(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "killed")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-n1", "-w", node(c, 0), "sh", "-c", "kill -9 $$")
	})
	wantExit(t, p, ref, sut, 128+int(syscall.SIGKILL))
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, []string{
		"srun: error: <NODE>1: task 0: Killed",
		"srun: Force Terminated StepId=<JOB>.0",
	})
}

// testSrunStdin: srun's stdin reaches one task, and with --input=all every task.
func testSrunStdin(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "stdin")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "data\n", "-n1", "cat")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout of `echo data | srun -n1 cat`", ref.Stdout, sut.Stdout, []string{"data"})
	sameLines(t, p, "stderr of `echo data | srun -n1 cat`", ref.Stderr, sut.Stderr, []string{})

	ref, sut = onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "data\n", "-N2", "-n2", "--input=all", "--label", "cat")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout of `echo data | srun -n2 --input=all --label cat`", ref.Stdout, sut.Stdout, []string{"0: data", "1: data"})
	sameLines(t, p, "stderr of `echo data | srun -n2 --input=all --label cat`", ref.Stderr, sut.Stderr, []string{})
}

// bulkStream is the deterministic bulkSize-byte input of testSrunStdinBulk.
func bulkStream() io.Reader {
	var seed [32]byte
	copy(seed[:], bulkSeed)
	return io.LimitReader(rand.NewChaCha8(seed), bulkSize)
}

// countingHash hashes and counts what srun prints.
type countingHash struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (w *countingHash) Write(b []byte) (int, error) {
	w.n += int64(len(b))
	return w.h.Write(b)
}

// countingReader counts what srun has taken of its stdin.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// stallingWriter is a countingHash that, once stallAt bytes are through, runs stall
// before it takes more: meanwhile nobody reads srun's stdout.
type stallingWriter struct {
	countingHash
	stallAt int64
	stall   func(written int64)
	stalled bool
}

func (w *stallingWriter) Write(b []byte) (int, error) {
	if !w.stalled && w.n >= w.stallAt {
		w.stalled = true
		w.stall(w.n)
	}
	return w.countingHash.Write(b)
}

// stallReport is what the stream looked like while srun's stdout was not read.
type stallReport struct {
	plateau  bool  // srun stopped taking stdin
	taken    int64 // stdin bytes srun had taken then
	inFlight int64 // taken minus the stdout bytes read before the stall
	stepdRSS int64 // KiB, the step manager of the task
}

// stepManagerRSS is the VmRSS (KiB) of the parent of the one process whose command
// line starts with marker: the step manager of that task, on either daemon.
func stepManagerRSS(marker string) (int64, error) {
	out, err := exec2("pgrep", "-f", "^"+marker)
	pids := strings.Fields(out)
	if err != nil || len(pids) != 1 {
		return 0, fmt.Errorf("pgrep -f ^%s: %q %v", marker, out, err)
	}
	stat, err := os.ReadFile("/proc/" + pids[0] + "/stat")
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...: comm may hold spaces, so count from its closing paren.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("short /proc/%s/stat", pids[0])
	}
	status, err := os.ReadFile("/proc/" + f[1] + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%s/status", f[1])
}

// testSrunStdinBulk: 100 MiB through `srun -n1 cat` arrive intact, also when srun's
// stdout is not read for a while after the first MiB. Meanwhile the stream stops
// (back-pressure reaches srun's stdin before the stream's end) and the step manager
// does not hold the output: its memory stays under stallStepdRSS.
func testSrunStdinBulk(t *testing.T, p pair) {
	want := sha256.New()
	if _, err := io.Copy(want, bulkStream()); err != nil {
		t.Fatal(err)
	}
	wantSum := hex.EncodeToString(want.Sum(nil))
	dirs := workDirs(t, p, "root", "bulk")
	type run struct {
		r     cluster.Result
		out   *stallingWriter
		stall stallReport
		err   error
	}
	ref, sut := onBoth(p, func(c *cluster.Cluster) run {
		marker := "bulkcat-" + c.Name
		in := &countingReader{r: bulkStream()}
		x := run{}
		x.out = &stallingWriter{countingHash: countingHash{h: sha256.New()}, stallAt: stallAt, stall: func(written int64) {
			last, since := in.n.Load(), time.Now()
			for deadline := time.Now().Add(stallPlateauTimeout); time.Since(since) < stallQuiet && time.Now().Before(deadline); {
				time.Sleep(procPoll)
				if n := in.n.Load(); n != last {
					last, since = n, time.Now()
				}
			}
			x.stall = stallReport{plateau: time.Since(since) >= stallQuiet, taken: last, inFlight: last - written}
			x.stall.stepdRSS, x.err = stepManagerRSS(marker)
		}}
		bc := srunCmd("root", dirs[c], srunBulkTimeout, "-n1", "bash", "-c", "exec -a "+marker+" cat")
		bc.StdinReader = in
		bc.Stdout = x.out
		x.r = c.RunClient(t, bc)
		return x
	})
	wantExit(t, p, ref.r, sut.r, 0)
	for _, x := range []struct {
		c *cluster.Cluster
		r run
	}{{p.ref, ref}, {p.sut, sut}} {
		got := hex.EncodeToString(x.r.out.h.Sum(nil))
		st := x.r.stall
		t.Logf("%s: %d bytes through srun in %v; stdout unread after %d bytes: srun stopped taking stdin %v, at %d bytes (%.1f MiB in flight), step manager VmRSS %d KiB",
			p.label(x.c), x.r.out.n, x.r.r.Elapsed.Round(time.Millisecond), stallAt, st.plateau, st.taken, float64(st.inFlight)/(1<<20), st.stepdRSS)
		if x.r.out.n != bulkSize || got != wantSum {
			t.Errorf("%s: srun printed %d bytes with sha256 %s, want the %d bytes of its stdin (sha256 %s)",
				p.label(x.c), x.r.out.n, got, bulkSize, wantSum)
		}
		if !x.r.out.stalled {
			continue // reported above: too little output
		}
		if !st.plateau || st.taken >= bulkSize {
			t.Errorf("%s: with srun's stdout unread, srun still took stdin (%d of %d bytes, stopped: %v): no back-pressure", p.label(x.c), st.taken, bulkSize, st.plateau)
		}
		if x.r.err != nil {
			t.Errorf("%s: step manager memory: %v", p.label(x.c), x.r.err)
		} else if x.c == p.sut && st.stepdRSS > stallStepdRSS>>10 {
			t.Errorf("%s: step manager VmRSS %d KiB with srun's stdout unread, want at most %d KiB (its output queue is bounded)", p.label(x.c), st.stepdRSS, stallStepdRSS>>10)
		}
	}
	sameLines(t, p, "stderr", ref.r.Stderr, sut.r.Stderr, []string{})
}
