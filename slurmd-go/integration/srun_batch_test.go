//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// srunJob submits the same batch job to both clusters in the partition "srun",
// waits for both to end COMPLETED 0:0 and returns the normalized, sorted lines of
// their output file "out".
func srunJob(t *testing.T, p pair, name, script string, argsFor func(c *cluster.Cluster) []string) (lref, lsut []string) {
	t.Helper()
	ref, sut := submitBoth(t, p, "root", script, func(c *cluster.Cluster) []string {
		return append([]string{"-p", srunPartition, "-J", name, "-o", "out"}, argsFor(c)...)
	}, "srun", name)
	out := map[*cluster.Cluster][]string{}
	for _, j := range []jobOf{ref, sut} {
		// Any end, so that a failed job shows its output.
		f := j.c.WaitJob(t, j.id, srunJobTimeout, cluster.JobTerminalStates...)
		text, _ := readJobFile(t, filepath.Join(j.dir, "out"))
		if f["JobState"] != "COMPLETED" || f["ExitCode"] != "0:0" {
			t.Errorf("%s: job %s %s ExitCode=%s, want COMPLETED 0:0; output:\n%s", p.label(j.c), j.id, f["JobState"], f["ExitCode"], text)
		}
		out[j.c] = dropSrunRaces(t, p.label(j.c), sortedLines(srunNormalizer(j.c, map[string]string{j.id: "<JOB>"})(text)))
	}
	return out[p.ref], out[p.sut]
}

// wantJobLines checks the output lines of both jobs against want and each other.
func wantJobLines(t *testing.T, p pair, lref, lsut, want []string) {
	t.Helper()
	want = sortedLines(strings.Join(want, "\n"))
	if !slices.Equal(lref, want) {
		t.Errorf("%s: job output (sorted, normalized)\n  %q\nwant\n  %q (the stock slurmd's behaviour changed?)", p.label(p.ref), lref, want)
	}
	if !slices.Equal(lsut, want) {
		t.Errorf("%s: job output (sorted, normalized)\n  %q\nwant\n  %q", p.label(p.sut), lsut, want)
	}
	if !slices.Equal(lref, lsut) {
		t.Errorf("job output differs (sorted, normalized):\nreference:\n  %q\nunder test:\n  %q", lref, lsut)
	}
}

// testSrunBatchStep: `sbatch -N4 --wrap 'srun ...'`: a 4-node step inside a batch
// job runs one task on each node.
func testSrunBatchStep(t *testing.T, p pair) {
	lref, lsut := srunJob(t, p, "step4", "", func(c *cluster.Cluster) []string {
		return []string{"-N4", "--wrap",
			`srun -N4 -n4 --label sh -c 'echo $SLURM_PROCID $SLURM_NODEID $SLURMD_NODENAME $SLURM_STEP_NUM_NODES'; echo srun-exit $?`}
	})
	want := []string{"srun-exit 0"}
	for i := range 4 {
		want = append(want, fmt.Sprintf("%d: %d %d <NODE>%d 4", i, i, i, i+1))
	}
	wantJobLines(t, p, lref, lsut, want)
}

// concurrentStepsScript starts concurrentSteps steps of one task at once in a
// 1-CPU job. In 22.05 a step gets its CPUs exclusively unless --overlap: without
// it the steps would run one after the other. Each step waits (bounded, 60 s) until
// every step has started, so "saw N" shows they all ran at the same time; the
// count is a bash glob, so that 40 waiting steps do not fork ls 10 times a second.
var concurrentStepsScript = fmt.Sprintf(`#!/bin/bash
for i in $(seq %[1]d); do
	srun -n1 --overlap bash -c 'touch started.$SLURM_STEP_ID; k=0
		count() { f=(started.*); n=${#f[@]}; }; count
		while [ $n -lt %[1]d ] && [ $k -lt 120 ]; do sleep 0.5; k=$((k+1)); count; done
		echo step $SLURM_STEP_ID saw $n' &
done
wait
echo all done
`, concurrentSteps)

// testSrunConcurrentSteps: 20 steps at once in one job all run and finish.
func testSrunConcurrentSteps(t *testing.T, p pair) {
	lref, lsut := srunJob(t, p, "steps", concurrentStepsScript, func(c *cluster.Cluster) []string {
		return []string{"-n1"}
	})
	want := []string{"all done"}
	for i := range concurrentSteps {
		want = append(want, fmt.Sprintf("step %d saw %d", i, concurrentSteps))
	}
	wantJobLines(t, p, lref, lsut, want)
}

// killOnBadExitScript: `srun -K -n3`: task 0 waits (bounded, 30 s) until the two
// others (sleep 300, renamed to a marker unique to the cluster) run, then exits 1;
// srun then terminates them.
const killOnBadExitScript = `#!/bin/bash
export KOE_MARKER=srunkoe-$SLURM_CLUSTER_NAME
srun -K -n3 --label bash -c 'if [ $SLURM_PROCID = 0 ]; then
		k=0; while [ $(pgrep -fc "^$KOE_MARKER") -lt 2 ] && [ $k -lt 300 ]; do sleep 0.1; k=$((k+1)); done
		exit 1
	fi
	exec -a $KOE_MARKER sleep 300'
echo srun-exit $?
`

// testSrunKillOnBadExit: with -K, one task exiting 1 gets the others (sleep)
// terminated: srun's messages and exit status (128+SIGTERM) are those of the stock
// daemon and no sleep is left.
func testSrunKillOnBadExit(t *testing.T, p pair) {
	lref, lsut := srunJob(t, p, "koe", killOnBadExitScript, func(c *cluster.Cluster) []string {
		return []string{"-N3", "-n3", "-w", strings.Join([]string{node(c, 0), node(c, 1), node(c, 2)}, ",")}
	})
	wantJobLines(t, p, lref, lsut, []string{
		"srun: error: <NODE>1: task 0: Exited with exit code 1",
		factsOf(t, p.ref).srunTerminating,
		"srun: error: <NODE>2: task 1: Terminated",
		"srun: error: <NODE>3: task 2: Terminated",
		"srun: Force Terminated StepId=<JOB>.0",
		"srun-exit 143",
	})
	for _, c := range p.both() {
		pattern := "^srunkoe-" + c.Name
		if !poll(taskGoneTimeout, func() bool { return pgrepCount(t, pattern) == 0 }) {
			out, _ := exec2("pgrep", "-af", pattern)
			t.Errorf("%s: the terminated tasks still run %v after the job ended:\n%s", p.label(c), taskGoneTimeout, out)
		}
	}
}
