//go:build linux

package stepd

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
)

// Parallel debugger launches (LAUNCH_PARALLEL_DEBUG: srun --debugger-test,
// srun under TotalView/DDT and other MPIR debuggers), as slurmstepd's
// pdebug.c does them. A debugger must attach to each task before it runs a
// single instruction of the program, so each task stops right after its
// exec and stays stopped, untraced, until the debugger continues it:
//
//	task helper: ... TaskProlog, TMPDIR ─▶ ptrace(PTRACE_TRACEME) ─▶ execve
//	             ─▶ the kernel stops it (SIGTRAP) for its tracer
//	step manager: wait for that stop ─▶ SIGSTOP ─▶ PTRACE_DETACH
//	             ─▶ the task sits in group stop (state T), traced by none
//	             ─▶ RESPONSE_LAUNCH_TASKS with the pids srun puts in
//	                MPIR_proctable
//	SIG_DEBUG_WAKE (srun's MPIR_Breakpoint): SIGCONT to each task that no
//	             debugger has attached to (TracerPid 0)
//
// ptrace requests are per thread in Linux: the tracer of a PTRACE_TRACEME
// child is the thread that forked it, and only that thread may detach it.
// The step manager therefore forks a debugged step's tasks and detaches
// them on one locked OS thread (debugThread); the helper calls TRACEME and
// execve on one locked thread too.

// DebugStopTimeout bounds the wait for a launch's debugged tasks to stop
// at their exec (one bound for all of them). Stock waits without bound; the task helper runs TaskProlog and the
// user's --task-prolog before the exec, so the bound is well above theirs.
const DebugStopTimeout = 5 * time.Minute

// debugThread pins the calling goroutine to its OS thread for a debugged
// launch and returns the matching unlock (a no-op for other launches).
func debugThread(debug bool) func() {
	if !debug {
		return func() {}
	}
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// traceMe is pdebug_stop_current, in the task helper just before execve:
// the exec will stop the task for the step manager. The thread stays locked
// so that the execve comes from the traced thread.
func (t *taskRun) traceMe() {
	runtime.LockOSThread()
	if _, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0); e != 0 {
		t.errorf("ptrace: %s", strerror(e))
	}
}

// errTaskNotStopped says a debugged task ended (or never stopped) before
// its stop at exec.
type errTaskNotStopped struct{ lines []string }

func (e *errTaskNotStopped) Error() string { return fmt.Sprint(e.lines) }

// traceProcess is pdebug_trace_process: wait for pid's stop at exec, then
// leave it stopped and untraced. It must run on the thread that forked pid.
// exit is the task's exit channel: a task that ends instead is an error
// whose lines are stock's. onSignal hears of each signal delivered on the
// way.
func traceProcess(pid int, stop, exit <-chan proc.Exit, deadline time.Time, onSignal func(tid int, sig syscall.Signal)) (*proc.Exit, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for stopped := false; !stopped; {
		select {
		case e := <-stop:
			sig := e.Status.StopSignal()
			if e.PID == pid && sig == syscall.SIGTRAP {
				stopped = true // the stop at exec
				continue
			}
			// A signal reached the tracee (one of the helper's threads,
			// e.g. the Go runtime's preemption signal) before its exec:
			// deliver it as if untraced and wait on.
			onSignal(e.PID, sig)
			if err := unix.PtraceCont(e.PID, int(sig)); err != nil {
				return nil, fmt.Errorf("ptrace(PTRACE_CONT, %d, %v): %w", e.PID, sig, err)
			}
		case e := <-exit:
			lines := []string{fmt.Sprintf("pdebug_trace_process WIFSTOPPED false for pid %d", pid)}
			switch {
			case e.Status.Exited():
				lines = append(lines, fmt.Sprintf("Process %d exited \"normally\" with return code %d", pid, e.Status.ExitStatus()))
			case e.Status.Signaled():
				lines = append(lines, fmt.Sprintf("Process %d killed by signal %d", pid, int(e.Status.Signal())))
			}
			return &e, &errTaskNotStopped{lines: lines}
		case <-timer.C:
			return nil, fmt.Errorf("task %d did not stop at exec within %v", pid, DebugStopTimeout)
		}
	}
	// The SIGSTOP is queued while the task is still in its ptrace stop;
	// PTRACE_DETACH resumes it and the pending SIGSTOP stops it again,
	// now untraced: what a debugger attaches to.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("kill(%d): %w", pid, err)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return nil, fmt.Errorf("ptrace(%d): %w", pid, err)
	}
	return nil, nil
}

// tracerPid is the TracerPid of /proc/<pid>/status (_being_traced).
func tracerPid(pid int) (int, error) { return proc.StatusInt(pid, "TracerPid") }

// wakeProcess is pdebug_wake_process: SIGCONT to a task stopped for a
// debugger unless a debugger traces it now. As stock, a task whose status
// cannot be read is woken.
func (s *Step) wakeProcess(pid int) {
	if pid <= 0 {
		return
	}
	if tracer, err := tracerPid(pid); err == nil && tracer != 0 {
		s.stepdLog(logDebug, "pid %d not stopped or being traced", pid)
		return
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		s.errorLine("kill(%d): %s", pid, strerror(err))
		return
	}
	s.stepdLog(logDebug, "woke pid %d", pid)
}

// taskPIDs are the pids of the step's local tasks that were started.
func (s *Step) taskPIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for _, t := range s.tasks {
		if t.pid > 0 {
			pids = append(pids, t.pid)
		}
	}
	return pids
}
