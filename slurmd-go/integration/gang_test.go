//go:build integration

// Issue 11 finding 10 under gang scheduling: with PreemptMode=GANG and a partition
// of OverSubscribe=FORCE:2, two batch jobs that each take every CPU of the one node
// share it by time slices: slurmctld's gang scheduler sends REQUEST_SUSPEND_INT to
// the node every SchedulerTimeSlice, suspending one job and resuming the other.
// Each job's script counts in a file. On both clusters, stock and slurmd-go: each
// job is seen SUSPENDED (squeue) with its script stopped (state T or D) while the
// other runs and counts on, and each is later seen running and counting again.
// Timing differs between runs, so the comparison is of what happened, not of when.
// Then both jobs are cancelled, one of them most likely suspended: both scripts
// must be gone (a frozen task cannot die until its step is thawed).
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named bounds of the gang test.
const (
	gangTimeSlice = 5               // seconds (SchedulerTimeSlice's minimum)
	gangTimeout   = 3 * time.Minute // both jobs seen suspended and resumed
)

// gangScript writes its pid, then counts once every 0.2 s into count.
const gangScript = `#!/bin/bash
echo $$ > pid
i=0
while :; do i=$((i+1)); echo $i > count.tmp; mv count.tmp count; sleep 0.2; done
`

func gangOptions(impl string) cluster.Options {
	o := restartOptions(impl)
	o.Nodes = 1
	o.ExtraConf = append(o.ExtraConf,
		"PreemptMode=GANG",
		fmt.Sprintf("SchedulerTimeSlice=%d", gangTimeSlice),
		"PartitionName=gang Nodes=ALL OverSubscribe=FORCE:2 MaxTime=INFINITE State=UP",
	)
	return o
}

// gangJob is what the test saw of one job.
type gangJob struct {
	id, dir          string
	suspendedStopped bool // seen SUSPENDED with its script stopped
	countAtSuspend   int  // its count then
	otherAtSuspend   int  // the other job's count then
	otherCounted     bool // the other counted on while this one stayed suspended
	resumedAfter     bool // seen RUNNING and counting again after that
}

func TestGangScheduling(t *testing.T) {
	p := startPair(t, gangOptions)
	var subs []subtest
	for _, c := range p.both() {
		subs = append(subs, subtest{p.label(c), func(t *testing.T) { runGang(t, c) }})
	}
	concurrently(t, subs...)
}

func runGang(t *testing.T, c *cluster.Cluster) {
	jobs := make([]*gangJob, 2)
	for i := range jobs {
		dir := c.WorkDir(t, "root", "gang", strconv.Itoa(i))
		id := c.SbatchIn(t, "root", dir, gangScript, "-p", "gang", "-N1", "-n", strconv.Itoa(c.HW.CPUs), "--mem=64", "-o", "/dev/null")
		jobs[i] = &gangJob{id: id, dir: dir}
	}
	count := func(j *gangJob) int {
		b, _ := os.ReadFile(filepath.Join(j.dir, "count"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	state := func(j *gangJob) string {
		b, _ := os.ReadFile(filepath.Join(j.dir, "pid"))
		return procState(strings.TrimSpace(string(b)))
	}
	var seen []string
	c.WaitFor(t, "each gang job suspended while the other counts, then resumed", gangTimeout, func() (bool, string) {
		recs, err := c.ShowJobsErr(t, "")
		if err != nil {
			return false, err.Error()
		}
		st := map[string]string{}
		for _, f := range recs {
			st[f["JobId"]] = f["JobState"]
		}
		done := true
		for i, j := range jobs {
			o := jobs[1-i]
			switch st[j.id] {
			case "SUSPENDED":
				if ps := state(j); !j.suspendedStopped && isStopped(ps) {
					j.suspendedStopped, j.countAtSuspend, j.otherAtSuspend = true, count(j), count(o)
					seen = append(seen, fmt.Sprintf("%s suspended at %d (state %s)", j.id, j.countAtSuspend, ps))
				} else if j.suspendedStopped && !j.resumedAfter && count(o) > j.otherAtSuspend && count(j) == j.countAtSuspend {
					j.otherCounted = true
				}
			case "RUNNING":
				if j.suspendedStopped && j.otherCounted && !j.resumedAfter && count(j) > j.countAtSuspend && !isStopped(state(j)) {
					j.resumedAfter = true
					seen = append(seen, fmt.Sprintf("%s running again at %d", j.id, count(j)))
				}
			}
			done = done && j.resumedAfter
		}
		return done, fmt.Sprintf("states %v, jobs %+v %+v", st, *jobs[0], *jobs[1])
	})
	t.Logf("%s: %s", c.Impl, strings.Join(seen, "; "))
	// Cancelled while the gang scheduler has one of them suspended (frozen
	// under proctrack/cgroup): both scripts die with their jobs, none is
	// left stopped on the node.
	var pids []string
	for _, j := range jobs {
		b, _ := os.ReadFile(filepath.Join(j.dir, "pid"))
		pids = append(pids, strings.TrimSpace(string(b)))
	}
	c.MustRun(t, "", "scancel", jobs[0].id, jobs[1].id)
	c.WaitFor(t, "both gang jobs' scripts gone after scancel", gangTimeout, func() (bool, string) {
		var alive []string
		for _, p := range pids {
			if st := procState(p); st != "" && st != "Z" {
				alive = append(alive, p+":"+st)
			}
		}
		return len(alive) == 0, strings.Join(alive, " ")
	})
}
