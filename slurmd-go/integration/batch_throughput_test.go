//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

const (
	burstArrayTasks = 50
	burstJobs       = 200
	// burstSubmitters bounds the concurrent sbatch processes per cluster: with 200 at
	// once on this 2-CPU machine, munged and slurmctld time out and submissions fail.
	burstSubmitters = 8
	// burstTimeout bounds submission plus execution of the burst on both clusters:
	// 1.5-2 min on the stock daemon on an otherwise idle 2-CPU machine, about 3 min
	// with the machine under load from other work.
	burstTimeout = 6 * time.Minute
)

// burst is what one cluster was given.
type burst struct {
	c       *cluster.Cluster
	dir     string
	arrayID string
	ids     []string // the single jobs; ids[i] wrote j-<i+1>.out
	errs    []error
	took    time.Duration
}

// submitBurst submits a 50-task array and 200 short jobs (8 sbatch at a time).
// Runs in its own goroutine: no t.Fatal.
func submitBurst(b *burst) {
	start := time.Now()
	defer func() { b.took = time.Since(start) }()
	var mu sync.Mutex
	id, err := b.c.SbatchErr("root", b.dir, "#!/bin/bash\necho arr-$SLURM_ARRAY_TASK_ID\n",
		"-a", fmt.Sprintf("1-%d", burstArrayTasks), "-o", "a-%A_%a.out")
	if err != nil {
		b.errs = append(b.errs, err)
	}
	b.arrayID = id
	b.ids = make([]string, burstJobs)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < burstSubmitters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id, err := b.c.SbatchErr("root", b.dir, fmt.Sprintf("#!/bin/bash\necho j-%d\n", i+1), "-o", fmt.Sprintf("j-%d.out", i+1))
				mu.Lock()
				if err != nil {
					b.errs = append(b.errs, fmt.Errorf("job %d: %w", i+1, err))
				}
				b.ids[i] = id
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < burstJobs; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// testThroughput: a 50-task array and 200 short jobs submitted at once to each
// cluster all reach COMPLETED with ExitCode 0:0 and their output; none is lost,
// none is left pending, running or COMPLETING; all four nodes ran jobs.
func testThroughput(t *testing.T, p pair) {
	var bs []*burst
	for _, c := range p.both() {
		bs = append(bs, &burst{c: c, dir: c.WorkDir(t, "root", "burst")})
	}
	began := time.Now()
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Add(1)
		go func() { defer wg.Done(); submitBurst(b) }()
	}
	wg.Wait()
	for _, b := range bs {
		t.Logf("%s: submitted %d jobs and a %d-task array in %v", p.label(b.c), burstJobs, burstArrayTasks, b.took.Round(100*time.Millisecond))
		for _, err := range b.errs {
			t.Errorf("%s: %v", p.label(b.c), err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	perNode := map[*cluster.Cluster]map[string]int{}
	for _, b := range bs {
		lbl := p.label(b.c)
		want := map[string]bool{}
		for _, id := range b.ids {
			want[id] = true
		}
		var recs map[string]map[string]string
		b.c.WaitFor(t, lbl+": every burst job COMPLETED", burstTimeout-time.Since(began), func() (bool, string) {
			recs = burstRecords(t, b, want)
			states := map[string]int{}
			for _, r := range recs {
				states[r["JobState"]]++
				if st := r["JobState"]; st != "COMPLETED" && slices.Contains(cluster.JobTerminalStates, st) {
					t.Fatalf("%s: job %s is %s (Reason=%s ExitCode=%s)", lbl, r["JobId"], st, r["Reason"], r["ExitCode"])
				}
			}
			return states["COMPLETED"] == burstJobs+burstArrayTasks, fmt.Sprintf("%d records: %v", len(recs), states)
		})
		t.Logf("%s: all %d done %v after the burst began", lbl, len(recs), time.Since(began).Round(100*time.Millisecond))

		perNode[b.c] = map[string]int{}
		tasks := map[string]bool{}
		for _, r := range recs {
			if r["ExitCode"] != "0:0" {
				t.Errorf("%s: job %s ExitCode=%s, want 0:0", lbl, r["JobId"], r["ExitCode"])
			}
			perNode[b.c][r["BatchHost"]]++
			if r["ArrayJobId"] == b.arrayID {
				tasks[r["ArrayTaskId"]] = true
			}
		}
		for i := 1; i <= burstArrayTasks; i++ {
			if !tasks[fmt.Sprint(i)] {
				t.Errorf("%s: array %s has no task %d", lbl, b.arrayID, i)
			}
		}
		// Nothing of the burst is left in the queue.
		for _, line := range b.c.Squeue(t) {
			id, _, _ := strings.Cut(line, " ")
			base, _, _ := strings.Cut(id, "_")
			if want[id] || base == b.arrayID {
				t.Errorf("%s: squeue still lists %q", lbl, line)
			}
		}
		// Every job wrote its output.
		files := listFiles(t, b.dir)
		if len(files) != burstJobs+burstArrayTasks {
			t.Errorf("%s: %d output files, want %d", lbl, len(files), burstJobs+burstArrayTasks)
		}
		for i := 1; i <= burstArrayTasks; i++ {
			name := fmt.Sprintf("a-%s_%d.out", b.arrayID, i)
			if s, ok := readJobFile(t, filepath.Join(b.dir, name)); s != fmt.Sprintf("arr-%d\n", i) {
				t.Errorf("%s: %s = %q (exists %v), want %q", lbl, name, s, ok, fmt.Sprintf("arr-%d\n", i))
			}
		}
		for i := 1; i <= burstJobs; i++ {
			name := fmt.Sprintf("j-%d.out", i)
			if s, ok := readJobFile(t, filepath.Join(b.dir, name)); s != fmt.Sprintf("j-%d\n", i) {
				t.Errorf("%s: %s = %q (exists %v), want %q", lbl, name, s, ok, fmt.Sprintf("j-%d\n", i))
			}
		}
		var dist []string
		for _, n := range b.c.NodeNames() {
			dist = append(dist, fmt.Sprintf("%s=%d", n, perNode[b.c][n]))
			if perNode[b.c][n] == 0 {
				t.Errorf("%s: node %s ran none of the burst's jobs", lbl, n)
			}
		}
		sort.Strings(dist)
		t.Logf("%s: jobs per node: %s", lbl, strings.Join(dist, " "))
	}
}

// burstRecords returns the `scontrol show job` records of a burst: the single jobs
// and every task of the array.
func burstRecords(t *testing.T, b *burst, single map[string]bool) map[string]map[string]string {
	t.Helper()
	all := b.c.AllJobs(t)
	recs := map[string]map[string]string{}
	for id, r := range all {
		if single[id] || (b.arrayID != "" && r["ArrayJobId"] == b.arrayID) {
			recs[id] = r
		}
	}
	return recs
}
