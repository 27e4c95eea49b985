//go:build integration

package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named bounds of the debugger test.
const (
	debugStopTimeout = 10 * time.Second // a listed task is in group stop (state T)
	debugEndTimeout  = 60 * time.Second // srun ends once its tasks were continued
	debugTasks       = 2
)

// debugProcRe is one line of srun's MPIR proctable dump (mpir_dump_proctable).
var debugProcRe = regexp.MustCompile(`srun: task:([0-9]+), host:(\S+), pid:([0-9]+), executable:(\S+)`)

// debugRun is what one cluster did with `srun --debugger-test`.
type debugRun struct {
	r      cluster.Result
	states map[int]string // task -> "<state> tracer=<TracerPid> comm=<comm>" while stopped
	err    error
}

// How the stopped tasks of a debugger launch are let go (debuggerRelease).
const (
	// releaseSIGCONT: the debugger continues each listed pid itself.
	releaseSIGCONT = "SIGCONT"
	// releaseDebugWake: SIG_DEBUG_WAKE to the step, what srun's MPIR_Breakpoint
	// sends (launch_g_fwd_signal); the step manager continues each task no
	// debugger traces.
	releaseDebugWake = "DebugWake"
	// releaseScancel: the step is cancelled while its tasks are stopped.
	releaseScancel = "Scancel"
)

// sigDebugWake is SIG_DEBUG_WAKE (slurm_protocol_defs.h), the same in every release.
const sigDebugWake = 995

// testSrunDebuggerTest: `srun --debugger-test -n2` (LAUNCH_PARALLEL_DEBUG, as a
// parallel debugger's launch) as an ordinary user: srun prints the MPIR proctable,
// every listed pid is the task's, stopped at its exec (state T, traced by nobody, the
// program already exec'd), and stays so until it is let go: SIGCONT to the listed
// pids (what the debugger does) or SIG_DEBUG_WAKE to the step (srun's
// MPIR_Breakpoint) lets the tasks run and the step end as on stock; scancel kills the
// stopped tasks as on stock.
func testSrunDebuggerTest(t *testing.T, p pair) {
	for _, how := range []string{releaseSIGCONT, releaseDebugWake, releaseScancel} {
		t.Run(how, func(t *testing.T) { testSrunDebuggerRelease(t, p, how) })
	}
}

func testSrunDebuggerRelease(t *testing.T, p pair, how string) {
	user := cluster.TestUser
	dirs := workDirs(t, p, user, "debugger-"+how)
	ref, sut := onBoth(p, func(c *cluster.Cluster) debugRun {
		return withSlot(c, func() debugRun { return debuggerTestOn(t, c, user, dirs[c], how) })
	})
	for _, x := range []struct {
		c   *cluster.Cluster
		run debugRun
	}{{p.ref, ref}, {p.sut, sut}} {
		if x.run.err != nil {
			t.Fatalf("%s: %v", p.label(x.c), x.run.err)
		}
		t.Logf("%s: tasks while stopped %v; srun %v", p.label(x.c), x.run.states, x.run.r)
	}
	ended(t, p, p.ref, ref.r)
	ended(t, p, p.sut, sut.r)
	if ref.r.ExitCode != sut.r.ExitCode || ref.r.Signal != sut.r.Signal {
		t.Errorf("srun's exit: reference %d (signal %v), under test %d (signal %v)", ref.r.ExitCode, ref.r.Signal, sut.r.ExitCode, sut.r.Signal)
	}
	if how != releaseScancel && ref.r.ExitCode != 0 {
		t.Errorf("%s: srun exit %d, want 0 (the stock slurmd's behaviour changed?)", p.label(p.ref), ref.r.ExitCode)
	}
	for task := range debugTasks {
		if !strings.HasPrefix(ref.states[task], "T tracer=0 ") {
			t.Errorf("%s: task %d not stopped untraced for the debugger: %q (the stock slurmd's behaviour changed?)", p.label(p.ref), task, ref.states[task])
		}
		if ref.states[task] != sut.states[task] {
			t.Errorf("task %d while stopped for the debugger: reference %q, under test %q", task, ref.states[task], sut.states[task])
		}
	}
	norm := func(c *cluster.Cluster, s string) string {
		s = debugProcRe.ReplaceAllString(srunNormalizer(c, nil)(s), "srun: task:$1, host:$2, pid:<PID>, executable:$4")
		s = srunCancelTimeRe.ReplaceAllString(s, "${1}<TIME>")
		s = srunCancelStepRe.ReplaceAllString(s, "${1}<JOB>${2}")
		s = slurmdDebugTime.ReplaceAllString(s, "<TIME>") // 26.05's line prefix
		// 26.05's scancel asks slurmctld twice, so SIG_DEBUG_WAKE can reach
		// the step again after the woken tasks ended: the step manager's
		// kill(2) of a gone task fails, on stock as here, only when the
		// second signal loses that race.
		s = debugWakeGoneRe.ReplaceAllString(s, "")
		// Stock slurmstepd claims its cancel line (msg_sent in
		// _handle_signal_container) only after writing it and without a
		// lock, so the signal and terminate requests of one scancel,
		// handled at once, may both write it (seen on 24.11); slurmd-go
		// writes it once. One copy is compared.
		lines := sortedLines(s)
		out := lines[:0]
		for i, l := range lines {
			if i > 0 && l == lines[i-1] && srunCancelLineRe.MatchString(l) {
				continue
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	if nr, ns := norm(p.ref, ref.r.Stderr), norm(p.sut, sut.r.Stderr); nr != ns {
		t.Errorf("srun's stderr differs (sorted, normalized):\nreference:\n  %s\nunder test:\n  %s", nr, ns)
	}
	if nr, ns := norm(p.ref, ref.r.Stdout), norm(p.sut, sut.r.Stdout); nr != ns {
		t.Errorf("the tasks' output differs (sorted, normalized):\nreference:\n  %s\nunder test:\n  %s", nr, ns)
	}
}

// debugWakeGoneRe is pdebug_wake_process's error for a task that already ended.
var debugWakeGoneRe = regexp.MustCompile(`(?m)^.*error: kill\([0-9]+\): No such process\n?`)

// srunCancelLineRe is the step manager's "*** STEP ... CANCELLED AT ... ***" line.
var srunCancelLineRe = regexp.MustCompile(`\*\*\* STEP \S+ ON \S+ CANCELLED AT `)

// srunCancelTimeRe is the time in "*** STEP <id> ON <node> CANCELLED AT <time> ***".
var srunCancelTimeRe = regexp.MustCompile(`(CANCELLED AT )[0-9T:-]+`)

// srunCancelStepRe is the job id in "*** STEP <job>.<step> ON ...".
var srunCancelStepRe = regexp.MustCompile(`(\*\*\* STEP )[0-9]+(\.[0-9]+ ON )`)

// debuggerTestOn runs the debugger launch on c: waits for srun's proctable, checks
// each listed process, lets the tasks go as how says and waits for srun. It runs in
// a goroutine of onBoth: errors are returned.
func debuggerTestOn(t *testing.T, c *cluster.Cluster, user, dir, how string) debugRun {
	cl, err := c.StartClient(t, srunCmd(user, dir, bgStepTimeout,
		"--debugger-test", "-N1", fmt.Sprintf("-n%d", debugTasks), "-w", node(c, 0),
		"sh", "-c", `echo "task $SLURM_PROCID of $SLURM_NTASKS"`))
	if err != nil {
		return debugRun{err: err}
	}
	listed := func() [][]string { return debugProcRe.FindAllStringSubmatch(cl.Stderr(), -1) }
	if !poll(stepRunTimeout, func() bool { return cl.Exited() || len(listed()) == debugTasks }) {
		cl.Kill()
		return debugRun{err: fmt.Errorf("no proctable of %d tasks within %v: %v", debugTasks, stepRunTimeout, cl.Wait())}
	}
	if cl.Exited() {
		return debugRun{err: fmt.Errorf("srun ended before its tasks were continued: %v", cl.Wait())}
	}
	run := debugRun{states: map[int]string{}}
	var pids []int
	for _, m := range listed() {
		task, _ := strconv.Atoi(m[1])
		pid, _ := strconv.Atoi(m[3])
		pids = append(pids, pid)
		var st string
		// The step manager's SIGSTOP may land just after srun printed the pid.
		poll(debugStopTimeout, func() bool { st = debugProcState(pid); return strings.HasPrefix(st, "T ") })
		run.states[task] = st
	}
	if cl.Exited() {
		return debugRun{err: fmt.Errorf("srun ended while its tasks were stopped: %v", cl.Wait())}
	}
	if err := debuggerRelease(t, c, user, how, pids); err != nil {
		cl.Kill()
		return debugRun{err: fmt.Errorf("%s: %w: %v", how, err, cl.Wait())}
	}
	r, ok := cl.WaitTimeout(debugEndTimeout)
	if !ok {
		cl.Kill()
		return debugRun{err: fmt.Errorf("srun still ran %v after its tasks were continued: %v", debugEndTimeout, cl.Wait())}
	}
	run.r = r
	return run
}

// debuggerRelease lets the stopped tasks pids go as how says.
func debuggerRelease(t *testing.T, c *cluster.Cluster, user, how string, pids []int) error {
	if how == releaseSIGCONT {
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				return fmt.Errorf("SIGCONT to task pid %d: %w", pid, err)
			}
		}
		return nil
	}
	// The task's own environment names its step.
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pids[0]))
	if err != nil {
		return err
	}
	var job, step string
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "SLURM_JOB_ID="); ok {
			job = v
		}
		if v, ok := strings.CutPrefix(kv, "SLURM_STEP_ID="); ok {
			step = v
		}
	}
	if job == "" || step == "" {
		return fmt.Errorf("no SLURM_JOB_ID/SLURM_STEP_ID in task %d's environment", pids[0])
	}
	args := []string{"scancel", job + "." + step}
	if how == releaseDebugWake {
		args = []string{"scancel", "--signal=" + strconv.Itoa(sigDebugWake), job + "." + step}
	}
	if _, stderr, err := c.Run(t, user, args...); err != nil {
		if how == releaseScancel && strings.Contains(stderr, scancelStepGone) {
			// 26.05's scancel of a step asks slurmctld twice; when the
			// first kill has already ended the step and its completion
			// is in, the second finds no step. The step was cancelled:
			// srun's output and exit are compared as usual.
			t.Logf("%s: %v: %s (the step had already ended)", c.Name, args, strings.TrimSpace(stderr))
			return nil
		}
		return fmt.Errorf("%v: %w: %s", args, err, stderr)
	}
	return nil
}

// scancelStepGone is scancel's error for a step slurmctld no longer has.
const scancelStepGone = "Invalid job id specified"

// debugProcState is "<state> tracer=<TracerPid> comm=<comm>" of pid from
// /proc/<pid>/status, or the error reading it.
func debugProcState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unreadable: " + err.Error()
	}
	f := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			f[k] = strings.TrimSpace(v)
		}
	}
	state, _, _ := strings.Cut(f["State"], " ")
	return fmt.Sprintf("%s tracer=%s comm=%s", state, f["TracerPid"], f["Name"])
}
