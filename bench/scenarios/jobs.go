package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Named waits of the job scenarios.
const (
	jobPollInterval   = 250 * time.Millisecond
	jobRunningTimeout = 60 * time.Second // stepd-rss: sbatch until RUNNING
	stepFindTimeout   = 20 * time.Second // stepd-rss: RUNNING until the job's process is seen
	jobGoneTimeout    = 60 * time.Second // after scancel: until the job has left the node
	stepSampleEvery   = 200 * time.Millisecond
	stepSettle        = 500 * time.Millisecond // RUNNING until the step manager is idle
)

// liveStates are the squeue states of a job that has not ended.
var liveStates = map[string]bool{"PENDING": true, "RUNNING": true, "CONFIGURING": true, "COMPLETING": true,
	"SUSPENDED": true, "RESIZING": true, "REQUEUED": true, "REQUEUE_HOLD": true, "REQUEUE_FED": true,
	"SIGNALING": true, "STAGE_OUT": true, "STOPPED": true, "RESV_DEL_HOLD": true}

// daemons are the env's node daemon targets, in target order.
func (e *Env) daemons() []*Target {
	var ts []*Target
	for _, t := range e.Targets {
		if t.Kind == results.KindDaemon && t.Node != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

// sbatch submits a batch job as root and returns its id.
func (e *Env) sbatch(args ...string) (string, error) {
	out, err := e.Cluster.Run(e.Ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	if err != nil {
		return "", fmt.Errorf("sbatch %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch %s: no job id in %q", strings.Join(args, " "), out)
	}
	return id, nil
}

// liveTasks is how many squeue lines of job id are in a live state (a line may stand for
// several pending array tasks), and the states seen.
func (e *Env) liveTasks(id string) (int, []string, error) {
	out, err := e.Cluster.Run(e.Ctx, "squeue", "-h", "-j", id, "-t", "all", "-o", "%T")
	if err != nil {
		return 0, nil, fmt.Errorf("squeue -j %s: %v: %s", id, err, strings.TrimSpace(out))
	}
	n := 0
	var states []string
	for _, l := range strings.Fields(out) {
		states = append(states, l)
		if liveStates[l] {
			n++
		}
	}
	return n, states, nil
}

// waitGone polls squeue until no line of job id is live, for at most limit.
func (e *Env) waitGone(id string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n, states, err := e.liveTasks(id)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s: %d lines still live after %v (states %v)", id, n, limit, states)
		}
		select {
		case <-e.Ctx.Done():
			return e.Ctx.Err()
		case <-time.After(jobPollInterval):
		}
	}
}

// jobThroughput submits, per daemon, one job array of `true` to the daemon's own partition
// and times it from sbatch until no task is left in squeue. Daemons run one after another.
type jobThroughput struct{}

func (jobThroughput) Name() string { return "job-throughput" }
func (jobThroughput) Title() string {
	return "Job throughput: an array of `true` through slurmctld (jobs/s; 1,000 tasks in the full profile)"
}

func (jobThroughput) Run(env *Env) error {
	return eachDaemon(env, func(t *Target) error {
		r, err := env.jobArray(t)
		if r != nil {
			env.Res.Jobs = append(env.Res.Jobs, *r)
		}
		return err
	})
}

// eachDaemon runs one measurement per daemon target, one after another,
// and joins their errors (a failed daemon does not hide the others).
func eachDaemon(env *Env, measure func(t *Target) error) error {
	ts := env.daemons()
	if len(ts) == 0 {
		return fmt.Errorf("no daemon targets")
	}
	return eachOf(env, ts, measure)
}

// eachOf runs one measurement per target of ts, one after another, and joins their errors.
func eachOf(env *Env, ts []*Target, measure func(t *Target) error) error {
	var errs []string
	for _, t := range ts {
		if err := measure(t); err != nil {
			errs = append(errs, t.Name+": "+err.Error())
			env.Logf("  %s: %v", t.Name, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (e *Env) jobArray(t *Target) (*results.JobThroughput, error) {
	n := e.Profile.JobArray
	part := e.Cluster.Partition(t.Node)
	t0 := time.Now()
	id, err := e.sbatch("-p", part, "-a", fmt.Sprintf("1-%d", n), "-o", "/dev/null", "--wrap", "true")
	if err != nil {
		return nil, err
	}
	if err := e.waitGone(id, e.Profile.JobArrayTimeout); err != nil {
		_, _ = e.Cluster.Run(e.Ctx, "scancel", id)
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	r := &results.JobThroughput{Target: t.Name, Partition: part, JobID: id, Tasks: n, Seconds: secs,
		Rate: float64(n) / secs, States: map[string]int{}}
	out, err := e.Cluster.Run(e.Ctx, "scontrol", "show", "job", "-o", id)
	if err != nil {
		return r, fmt.Errorf("scontrol show job %s: %v: %s", id, err, strings.TrimSpace(out))
	}
	tasks := 0
	for _, l := range strings.Split(out, "\n") {
		f := jobFields(l)
		if f["JobId"] == "" {
			continue
		}
		tasks++
		r.States[f["JobState"]]++
	}
	r.Completed = r.States["COMPLETED"]
	e.Logf("  %s: %d tasks in %.2fs: %.1f jobs/s, final states %v", t.Name, n, secs, r.Rate, r.States)
	if tasks != n || r.Completed != n {
		return r, fmt.Errorf("job %s: %d of %d tasks listed, %d COMPLETED (states %v; see %s)",
			id, tasks, n, r.Completed, r.States, e.Cluster.Dir)
	}
	return r, nil
}

// jobFields splits one line of `scontrol show job -o` into its key=value fields (values
// without spaces are enough here).
func jobFields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
	return m
}

// stepdRSS runs, per daemon, one batch job of `sleep` and samples the VmRSS of its step
// manager (stock: `slurmstepd: [<id>.batch]`; slurmd-go: `slurmstepd-go serve`) while idle.
type stepdRSS struct{}

func (stepdRSS) Name() string  { return "stepd-rss" }
func (stepdRSS) Title() string { return "Resident memory of one running step's manager" }

func (stepdRSS) Run(env *Env) error {
	return eachDaemon(env, func(t *Target) error {
		r, err := env.stepRSS(t)
		if r != nil {
			env.Res.StepMg = append(env.Res.StepMg, *r)
		}
		return err
	})
}

func (e *Env) stepRSS(t *Target) (res *results.StepRSS, err error) {
	part := e.Cluster.Partition(t.Node)
	sleep := strconv.Itoa(int(e.Profile.StepSleep / time.Second))
	id, err := e.sbatch("-p", part, "-o", "/dev/null", "--wrap", "sleep "+sleep)
	if err != nil {
		return nil, err
	}
	defer func() {
		_, _ = e.Cluster.Run(e.Ctx, "scancel", id)
		if gerr := e.waitGone(id, jobGoneTimeout); gerr != nil && err == nil {
			err = gerr
		}
	}()
	if err := e.waitState(id, "RUNNING", jobRunningTimeout); err != nil {
		return nil, err
	}
	pid, cmdline, err := findStepManager(id, stepFindTimeout)
	if err != nil {
		return nil, err
	}
	time.Sleep(stepSettle)
	r := &results.StepRSS{Target: t.Name, Partition: part, JobID: id, PID: pid, Cmdline: cmdline}
	for i := 0; i < e.Profile.StepSamples; i++ {
		if i > 0 {
			time.Sleep(stepSampleEvery)
		}
		rss, thr, err := vmRSS(pid)
		if err != nil {
			return nil, fmt.Errorf("step manager %d (%s) of job %s: %w", pid, cmdline, id, err)
		}
		r.SamplesKB = append(r.SamplesKB, rss)
		r.Threads = thr
	}
	s := slices.Clone(r.SamplesKB)
	slices.Sort(s)
	r.RSSMedianKB = s[len(s)/2]
	if m, err := procstat.ReadMem(pid); err == nil {
		r.Mem = &m
	} else {
		return nil, fmt.Errorf("step manager %d (%s) of job %s: %w", pid, cmdline, id, err)
	}
	e.Logf("  %s: job %s step manager pid %d (%s): VmRSS median %d KiB, %d threads", t.Name, id, pid, cmdline, r.RSSMedianKB, r.Threads)
	return r, nil
}

// waitState polls squeue until job id is in state, for at most limit.
func (e *Env) waitState(id, state string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, states, err := e.liveTasks(id)
		if err != nil {
			return err
		}
		if slices.Contains(states, state) {
			return nil
		}
		if len(states) > 0 && !liveStates[states[0]] {
			return fmt.Errorf("job %s ended %s before %s", id, states[0], state)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s: not %s after %v (states %v)", id, state, limit, states)
		}
		select {
		case <-e.Ctx.Done():
			return e.Ctx.Err()
		case <-time.After(jobPollInterval):
		}
	}
}

// findStepManager finds on this machine a process of job id (SLURM_JOB_ID=id in its
// environment) and walks up its parents to the nearest step manager: a process whose
// argv[0] names slurmstepd and that is not slurmstepd-go's task helper.
func findStepManager(id string, limit time.Duration) (int, string, error) {
	deadline := time.Now().Add(limit)
	want := []byte("SLURM_JOB_ID=" + id + "\x00")
	for {
		ents, _ := os.ReadDir("/proc")
		var seen []string
		for _, d := range ents {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
			if err != nil || !containsEnv(env, want) {
				continue
			}
			for p, hops := pid, 0; p > 1 && hops < 16; hops++ {
				cl := cmdline(p)
				seen = append(seen, fmt.Sprintf("%d:%s", p, cl))
				if isStepManager(cl) {
					return p, cl, nil
				}
				p = ppid(p)
			}
		}
		if time.Now().After(deadline) {
			return 0, "", fmt.Errorf("job %s: no step manager found after %v (job processes and parents: %v)", id, limit, seen)
		}
		time.Sleep(jobPollInterval)
	}
}

func containsEnv(env, kv []byte) bool {
	return strings.HasPrefix(string(env), string(kv)) || strings.Contains(string(env), "\x00"+string(kv))
}

func isStepManager(cl string) bool {
	f := strings.Fields(cl)
	if len(f) == 0 || !strings.Contains(filepath.Base(f[0]), "slurmstepd") {
		return false
	}
	return !(len(f) > 1 && f[1] == "task")
}

// cmdline is /proc/pid/cmdline with spaces for NULs.
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// vmRSS reads VmRSS (KiB) and Threads from /proc/pid/status.
func vmRSS(pid int) (int64, int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	var rss int64 = -1
	thr := 0
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			rss, _ = strconv.ParseInt(f[0], 10, 64)
		case "Threads":
			thr, _ = strconv.Atoi(f[0])
		}
	}
	if rss < 0 {
		return 0, 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return rss, thr, nil
}
