//go:build integration

// Issue 3, "Batch jobs end to end": every sbatch job runs on a node of the daemon
// under test (TIEE_SLURMD_IMPL) exactly as on the stock slurmd. Each test starts two
// clusters in one run: the reference (always the stock slurmd) and the one under test
// (the same stock slurmd when TIEE_SLURMD_IMPL=stock), submits the same jobs to both
// and compares what slurmctld and the job's files show, normalized for what must
// differ (job ids, node names, cluster name, directories, ports), and against concrete
// values measured on the stock daemon.
//
// Cluster configuration (batchOptions), chosen so that the stock daemon on this
// machine tracks every process and the suite stays fast:
//
//   - ProctrackType=proctrack/cgroup with cgroup.conf CgroupPlugin=autodetect (this
//     machine: cgroup v1 controllers under /sys/fs/cgroup beside a v2 hierarchy at
//     /sys/fs/cgroup/unified, so the stock slurmd picks cgroup/v1; the Debian build has
//     MULTIPLE_SLURMD, so each node's cgroups live under slurm_<NodeName>: node names are
//     random per cluster (cluster.RandomNodePrefix) so that clusters never share one).
//     A child that leaves the process group (setsid) is still killed: proctrack/pgid
//     would miss it.
//   - TaskPlugin=task/none; DefMemPerCPU=100, so two 1-CPU jobs share a 2-CPU node
//     (without it a job gets the whole node's memory) and the batch shell gets
//     RLIMIT_RSS = 100 MiB.
//   - KillWait=3 (slurmd waits MAX(KillWait, 5) s between SIGTERM and SIGKILL).
//   - MinJobAge=600: finished jobs stay in `scontrol show job` for the whole test.
//   - Prolog and Epilog scripts (below) that record their environment and fail on
//     request, driven by marker files in the job's working directory.
//   - The cluster directory on tmpfs (cluster.Options.Tmpfs): slurmctld fsyncs its
//     state on every job change, seconds each on this machine's disk.
//
// Time limits are minutes and slurmctld checks them every 30 s (PERIODIC_TIMEOUT),
// so the TIMEOUT job takes 60-90 s; everything else runs beside it (subtests run
// concurrently, see concurrently). Wall time on the stock daemon: about 2.5 min for
// TestBatch plus TestBatchPrologAlloc; the 250-job burst (TestBatch/Nodes/Throughput)
// is the critical path.
//
// Run alone: sudo TIEE_SLURMD_IMPL=stock go test -tags integration -count=1 -v
// -run TestBatch ./slurmd-go/integration/ (TIEE_SLURMD_IMPL=go, the default, tests
// bin/slurmd-go against the stock reference). `make integration-stock` and
// `make integration` run it with the rest of the real-cluster tests; both must pass.
package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named bounds and values of the batch tests.
const (
	shortJobTimeout = 90 * time.Second  // a short job is submitted, waits for a CPU, runs and is gone
	fileTimeout     = 30 * time.Second  // a job writes a file we wait for
	killTimeout     = 30 * time.Second  // scancel until every process is gone
	timeLimitBound  = 150 * time.Second // --time=1: 60 s + up to 30 s check period + kill
	drainTimeout    = 30 * time.Second  // a failed prolog drains the node
	nodeIdleTimeout = 30 * time.Second  // a node is idle again after its job
	signalSettle    = 1 * time.Second   // a signal that must not arrive had time to
	filePoll        = 100 * time.Millisecond

	// batchKillWait is the configured KillWait; slurmd waits MAX(KillWait, 5) s
	// (req.c _rpc_terminate_job) between SIGTERM and SIGKILL.
	batchKillWait = 3 * time.Second
	// batchMemPerCPU is DefMemPerCPU (MiB).
	batchMemPerCPU = 100

	// FirstJobId is drawn from [firstJobIDLow, firstJobIDLow+firstJobIDSpan); a
	// cluster uses a few hundred ids.
	firstJobIDLow  = 2000
	firstJobIDSpan = 5000

	// Marker files in a job's working directory read by the Prolog/Epilog below.
	markRecordProlog = "record-prolog" // prolog writes prolog.<jobid>.env
	markRecordEpilog = "record-epilog" // epilog writes epilog.<jobid>.env and .procs
	// markFailProlog: the prolog exits 1 after a second. With PrologFlags=Alloc slurmctld
	// sends the batch launch beside REQUEST_LAUNCH_PROLOG; the second makes it arrive while
	// the Prolog runs, on either daemon. One that arrives after the failure finds the
	// credential revoked and is refused by stock and slurmd-go alike, and slurmctld then
	// records ExitCode 1:0 instead of 0:0: a race between slurmctld's two messages that
	// CI once lost with a Prolog that failed in 44 ms.
	markFailProlog = "fail-prolog"
)

// batchProlog and batchEpilog run as root under /bin/sh with only slurmd's
// environment (there is no PATH: absolute paths). The epilog also counts the
// processes still carrying the job's "linger" marker, to show it runs after every
// process of the job is gone.
const (
	batchProlog = `#!/bin/sh
d="$SLURM_JOB_WORK_DIR"
if [ -e "$d/` + markRecordProlog + `" ]; then /usr/bin/env -0 > "$d/prolog.$SLURM_JOB_ID.env"; fi
if [ -e "$d/` + markFailProlog + `" ]; then /bin/sleep 1; exit 1; fi
exit 0
`
	batchEpilog = `#!/bin/sh
d="$SLURM_JOB_WORK_DIR"
if [ -e "$d/` + markRecordEpilog + `" ]; then
	/usr/bin/env -0 > "$d/epilog.$SLURM_JOB_ID.env"
	/usr/bin/pgrep -f "linger-$SLURM_CLUSTER_NAME-$SLURM_JOB_ID" | /usr/bin/wc -l > "$d/epilog.$SLURM_JOB_ID.procs"
fi
exit 0
`
)

func batchOptions(impl string) cluster.Options {
	return cluster.Options{
		Impl:       impl,
		NodePrefix: cluster.RandomNodePrefix(),
		Tmpfs:      true,
		Prolog:     batchProlog,
		Epilog:     batchEpilog,
		// No CgroupAutomount: 22.05's default (no) is what these tests want, and 24.11
		// on log the key as defunct.
		CgroupConf: []string{
			"CgroupPlugin=autodetect",
			"CgroupMountpoint=/sys/fs/cgroup",
			"ConstrainCores=no",
			"ConstrainRAMSpace=no",
		},
		ExtraConf: []string{
			"ProctrackType=proctrack/cgroup",
			"TaskPlugin=task/none",
			fmt.Sprintf("KillWait=%d", int(batchKillWait/time.Second)),
			"MinJobAge=600",
			fmt.Sprintf("DefMemPerCPU=%d", batchMemPerCPU),
			"JobCompType=jobcomp/none",
			// Distinct 4-digit job ids per cluster: an id never equals a small value
			// such as a node count (normalization replaces ids as words), %5j still
			// shows its zero padding, and ids stay clear of 8192 (ulimit -a output).
			fmt.Sprintf("FirstJobId=%d", firstJobIDLow+rand.IntN(firstJobIDSpan)),
		},
	}
}

// pair is the reference cluster (stock slurmd) and the one under test.
type pair struct {
	ref, sut *cluster.Cluster
}

// startPair starts the reference cluster and the cluster under test with the same
// options (except Impl and the random node names).
func startPair(t *testing.T, opts func(impl string) cluster.Options) pair {
	t.Helper()
	ref := cluster.Start(t, opts(cluster.ImplStock))
	sut := cluster.Start(t, opts(""))
	t.Logf("reference %s (%s, nodes %v); under test %s (%s, nodes %v)",
		ref.Name, ref.Impl, ref.NodeNames(), sut.Name, sut.Impl, sut.NodeNames())
	return pair{ref: ref, sut: sut}
}

func (p pair) both() []*cluster.Cluster { return []*cluster.Cluster{p.ref, p.sut} }

// label names a cluster of the pair in messages.
func (p pair) label(c *cluster.Cluster) string {
	if c == p.ref {
		return "reference(stock)"
	}
	return "under-test(" + c.Impl + ")"
}

// node is the name of the i-th node (0-based) of c.
func node(c *cluster.Cluster, i int) string { return c.Nodes[i].Name }

// Node roles in TestBatch: the time-limit job holds one CPU of node 3 for 60-90 s,
// the scancel test needs node 2 to itself (it must be idle afterwards), the
// prolog-failure test drains node 1; everything else runs on nodes 0 and 3.
const (
	nodeBasic     = 0
	nodePrologBad = 1
	nodeScancel   = 2
	nodeTimeLimit = 3
)

// basicNodes are the sbatch arguments that keep a job off the nodes other tests
// reserve.
func basicNodes(c *cluster.Cluster) string {
	return "--exclude=" + node(c, nodePrologBad) + "," + node(c, nodeScancel)
}

// TestBatch is the batch-job acceptance suite on one pair of clusters.
func TestBatch(t *testing.T) {
	p := startPair(t, batchOptions)

	concurrently(t,
		subtest{"TimeLimit", func(t *testing.T) { testTimeLimit(t, p) }},
		subtest{"ExitCodes", func(t *testing.T) { testExitCodes(t, p) }},
		subtest{"Environment", func(t *testing.T) { testEnvironment(t, p) }},
		subtest{"UserEnvironment", func(t *testing.T) { testUserEnvironment(t, p) }},
		subtest{"OutputFiles", func(t *testing.T) { testOutputFiles(t, p) }},
		subtest{"Signals", func(t *testing.T) { testSignals(t, p) }},
		subtest{"Nodes", func(t *testing.T) {
			// These two need their node to themselves; the burst then uses every node.
			concurrently(t,
				subtest{"Scancel", func(t *testing.T) { testScancel(t, p) }},
				subtest{"PrologFailure", func(t *testing.T) { testPrologFailure(t, p, false) }},
			)
			t.Run("Throughput", func(t *testing.T) { testThroughput(t, p) })
		}},
	)
}

// TestBatchPrologAlloc: the same exit codes, Epilog/Prolog environments and
// Prolog failure with PrologFlags=Alloc, where slurmctld sends REQUEST_LAUNCH_PROLOG
// at allocation and waits for REQUEST_COMPLETE_PROLOG before the batch launch.
func TestBatchPrologAlloc(t *testing.T) {
	p := startPair(t, func(impl string) cluster.Options {
		o := batchOptions(impl)
		o.ExtraConf = append(o.ExtraConf, "PrologFlags=Alloc")
		return o
	})
	concurrently(t,
		subtest{"ExitCodes", func(t *testing.T) { testExitCodes(t, p) }},
		subtest{"PrologFailure", func(t *testing.T) { testPrologFailure(t, p, true) }},
	)
}

// subtest is a named subtest for concurrently.
type subtest struct {
	name string
	f    func(t *testing.T)
}

// concurrently runs the subtests at the same time, each t.Run from its own goroutine,
// and returns when all have finished. Unlike t.Parallel this is not bound by
// -test.parallel (GOMAXPROCS: 2 on the test machine), and the caller continues after
// them.
func concurrently(t *testing.T, tests ...subtest) {
	t.Helper()
	var wg sync.WaitGroup
	for _, st := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(st.name, st.f)
		}()
	}
	wg.Wait()
}

// normalizer replaces what must differ between the two clusters: the cluster
// directory, the cluster name, the node name prefix and the given words (job ids,
// node names: word -> label; matched as whole words, ids also zero-padded), and
// slurmctld's port.
func normalizer(c *cluster.Cluster, words map[string]string) func(string) string {
	type wordRepl struct {
		re    *regexp.Regexp
		label string
	}
	var ws []wordRepl
	// Longest first, so that "12" never eats part of "123".
	keys := sortedKeys(words)
	sort.SliceStable(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, w := range keys {
		if w == "" {
			continue
		}
		ws = append(ws, wordRepl{wordRe("0*" + regexp.QuoteMeta(w)), words[w]})
	}
	ws = append(ws, wordRepl{wordRe(fmt.Sprint(c.CtldPort)), "<CTLDPORT>"})
	// Node names are <prefix><1..N> on both clusters: replacing the prefix also
	// normalizes hostlist expressions such as "<prefix>[1,4]".
	prefix := strings.TrimRight(node(c, 0), "0123456789")
	r := strings.NewReplacer(c.Dir, "<DIR>", c.Name, "<CLUSTER>", prefix, "<NODE>")
	return func(s string) string {
		for _, w := range ws {
			// Twice: adjacent matches ("12-12") share the separator.
			for range 2 {
				s = w.re.ReplaceAllString(s, "${1}"+w.label+"${2}")
			}
		}
		return r.Replace(s)
	}
}

// wordRe matches expr between non-alphanumeric characters (or the ends); unlike \b
// it treats '_' as a separator, as in "out-<A>_<a>.txt". Groups 1 and 2 are the
// separators.
func wordRe(expr string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^0-9A-Za-z])` + expr + `([^0-9A-Za-z]|$)`)
}

// jobWords are the normalizer words of one job: its id and its batch host (jobs
// not pinned to a node may run on different nodes of the two clusters).
func jobWords(j jobOf, f map[string]string) map[string]string {
	return map[string]string{j.id: "<JOB>", f["BatchHost"]: "<BATCHHOST>"}
}

// readJobFile returns a file's content ("" and false if it does not exist).
func readJobFile(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	return string(b), true
}

// mustRead fails the test if path is missing.
func mustRead(t *testing.T, path string) string {
	t.Helper()
	s, ok := readJobFile(t, path)
	if !ok {
		t.Fatalf("%s does not exist", path)
	}
	return s
}

// waitFileContains waits until path exists and contains sub.
func waitFileContains(t *testing.T, c *cluster.Cluster, path, sub string, timeout time.Duration) string {
	t.Helper()
	var s string
	c.WaitFor(t, fmt.Sprintf("%s to contain %q", path, sub), timeout, func() (bool, string) {
		var ok bool
		s, ok = readJobFile(t, path)
		return ok && strings.Contains(s, sub), fmt.Sprintf("%q", s)
	})
	return s
}

// touch creates an empty marker file.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
}

// parseEnv0 parses `env -0` output.
func parseEnv0(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, "\x00") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// diffNames reports the names only in a and only in b.
func diffNames(a, b map[string]string) (onlyA, onlyB []string) {
	for _, k := range sortedKeys(a) {
		if _, ok := b[k]; !ok {
			onlyA = append(onlyA, k)
		}
	}
	for _, k := range sortedKeys(b) {
		if _, ok := a[k]; !ok {
			onlyB = append(onlyB, k)
		}
	}
	return onlyA, onlyB
}

// compareEnv checks that two environments have the same variable names and, except
// for the names in skip, the same values after normalization. The job-time variables
// (jobTimeVars, 24.11 on) hold each job's own times: their difference, the job's time
// limit, must be the same.
func compareEnv(t *testing.T, what string, ref, sut map[string]string, nref, nsut func(string) string, skip ...string) {
	t.Helper()
	onlyRef, onlySut := diffNames(ref, sut)
	if len(onlyRef) > 0 || len(onlySut) > 0 {
		t.Errorf("%s: variable names differ: only on the reference: %v; only under test: %v", what, onlyRef, onlySut)
	}
	_, hasRef := ref[jobTimeVars[0]]
	_, hasSut := sut[jobTimeVars[0]]
	if hasRef || hasSut {
		a, okRef := jobTimeSpan(ref)
		b, okSut := jobTimeSpan(sut)
		if !okRef || !okSut || a < 0 || b < 0 {
			t.Errorf("%s: %s - %s = %v (valid %v) on the reference, %v (valid %v) under test, want two times, the end not before the start",
				what, jobTimeVars[1], jobTimeVars[0], a, okRef, b, okSut)
		}
		skip = append(skip, jobTimeVars...)
	}
	for k, re := range jobIDVars {
		vr, okRef := ref[k]
		vs, okSut := sut[k]
		if !okRef && !okSut {
			continue
		}
		if !re.MatchString(vr) || !re.MatchString(vs) {
			t.Errorf("%s: %s = %q on the reference, %q under test, want the form %s", what, k, vr, vs, re)
		}
		skip = append(skip, k)
	}
	for _, k := range sortedKeys(ref) {
		v2, ok := sut[k]
		if !ok || slices.Contains(skip, k) {
			continue
		}
		if a, b := nref(ref[k]), nsut(v2); a != b {
			t.Errorf("%s: %s = %q on the reference, %q under test (normalized)", what, k, a, b)
		}
	}
}

// jobOf is a job submitted to one cluster of a pair.
type jobOf struct {
	c   *cluster.Cluster
	id  string
	dir string // its working directory
}

// submitBoth submits the same script with the same arguments to both clusters,
// in WorkDir(user, sub...) of each; args may refer to the cluster through argsFor.
func submitBoth(t *testing.T, p pair, user, script string, argsFor func(c *cluster.Cluster) []string, sub ...string) (ref, sut jobOf) {
	t.Helper()
	var js []jobOf
	for _, c := range p.both() {
		dir := c.WorkDir(t, user, sub...)
		var args []string
		if argsFor != nil {
			args = argsFor(c)
		}
		js = append(js, jobOf{c: c, id: c.SbatchIn(t, user, dir, script, args...), dir: dir})
	}
	return js[0], js[1]
}

// waitBoth waits for both jobs to reach one of states and returns their fields.
func waitBoth(t *testing.T, ref, sut jobOf, timeout time.Duration, states ...string) (fr, fs map[string]string) {
	t.Helper()
	fr = ref.c.WaitJob(t, ref.id, timeout, states...)
	fs = sut.c.WaitJob(t, sut.id, timeout, states...)
	return fr, fs
}

// sameFields checks that the named `scontrol show job` fields are equal on both
// clusters and, where want has the key, equal to want.
func sameFields(t *testing.T, what string, fr, fs map[string]string, want map[string]string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if fr[k] != fs[k] {
			t.Errorf("%s: %s=%q on the reference, %q under test", what, k, fr[k], fs[k])
		}
		if w, ok := want[k]; ok && fr[k] != w {
			t.Errorf("%s: %s=%q on the reference, want %q (the stock slurmd's behaviour changed?)", what, k, fr[k], w)
		}
		if w, ok := want[k]; ok && fs[k] != w {
			t.Errorf("%s: %s=%q under test, want %q", what, k, fs[k], w)
		}
	}
}

// stepdLine is how slurmstepd writes an error into the job's stderr:
// "slurmstepd-<NodeName>: error: <message>".
func stepdLine(nodeName, msg string) string {
	return "slurmstepd-" + nodeName + ": error: " + msg
}

// pgrepCount counts the processes whose command line contains pattern.
func pgrepCount(t *testing.T, pattern string) int {
	t.Helper()
	out, err := exec2("pgrep", "-f", pattern)
	if err != nil && out == "" {
		return 0 // pgrep exits 1 when nothing matches
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// hostShortName is gethostname() up to the first dot: what slurmd calls
// conf->hostname and `%N` expands to.
func hostShortName(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatalf("%v", err)
	}
	h, _, _ = strings.Cut(h, ".")
	return h
}

// listFiles lists the regular files under dir (relative paths, sorted), skipping
// the marker and record files of the Prolog/Epilog.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var fs []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fs = append(fs, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	sort.Strings(fs)
	return fs
}

// exec2 runs a local command (combined output), bounded by fileTimeout.
func exec2(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// TestBatchNormalizer pins the normalization the comparisons rely on (no cluster).
func TestBatchNormalizer(t *testing.T) {
	c := &cluster.Cluster{Dir: "/dev/shm/ti-1", Name: "tiabc", CtldPort: 21353,
		Nodes: []cluster.Node{{Name: "bqxkzn1"}, {Name: "bqxkzn2"}}}
	n := normalizer(c, map[string]string{"6600": "<JOB>", "bqxkzn2": "<BATCHHOST>"})
	for in, want := range map[string]string{
		"out-6600_1.txt":                          "out-<JOB>_1.txt",
		"e-06600-0000006600.txt":                  "e-<JOB>-<JOB>.txt",
		"6600-6600":                               "<JOB>-<JOB>",
		"16600 66001 6600":                        "16600 66001 <JOB>",
		"tiabc:127.0.0.1:21353:9728:109":          "<CLUSTER>:127.0.0.1:<CTLDPORT>:9728:109",
		"/dev/shm/ti-1/work/root":                 "<DIR>/work/root",
		"bqxkzn[1-2] bqxkzn1 bqxkzn2":             "<NODE>[1-2] <NODE>1 <BATCHHOST>",
		"slurmstepd-bqxkzn2: error: *** JOB 6600": "slurmstepd-<BATCHHOST>: error: *** JOB <JOB>",
	} {
		if got := n(in); got != want {
			t.Errorf("normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
