//go:build linux

package stepd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
)

// pdebugTestTimeout bounds each wait of these tests.
const pdebugTestTimeout = 10 * time.Second

// procState is the State letter and TracerPid of pid.
func procState(t *testing.T, pid int) (string, int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var state string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "State:"); ok {
			state = strings.Fields(v)[0]
		}
	}
	tracer, err := tracerPid(pid)
	if err != nil {
		t.Fatal(err)
	}
	return state, tracer
}

// waitProcState polls pid until its state is want.
func waitProcState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(pdebugTestTimeout)
	for {
		st, tracer := procState(t, pid)
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: state %s (tracer %d), want %s within %v", pid, st, tracer, want, pdebugTestTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTraceProcess: a child that traces itself stops at its exec; the
// reaper hands that stop to StartTraced's stop channel, not as an exit; traceProcess leaves
// it stopped (T) and untraced, what a debugger attaches to; a debug wake
// continues it, and its exit still comes on its Start channel.
func TestTraceProcess(t *testing.T) {
	// The tracer is the thread that forked the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := proc.NewReaper()
	defer r.Stop()
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true} // PTRACE_TRACEME before execve
	exit, stop, err := r.StartTraced(cmd)
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if e, err := traceProcess(pid, stop, exit, time.Now().Add(pdebugTestTimeout), func(int, syscall.Signal) {}); err != nil || e != nil {
		t.Fatalf("traceProcess: %v %v", e, err)
	}
	waitProcState(t, pid, "T")
	if _, tracer := procState(t, pid); tracer != 0 {
		t.Fatalf("still traced by %d after the detach", tracer)
	}
	select {
	case e := <-exit:
		t.Fatalf("exit while stopped: %#x", uint32(e.Status))
	case <-time.After(200 * time.Millisecond):
	}
	// SIG_DEBUG_WAKE's loop over the step's tasks.
	s := &Step{spec: &stepapi.StartSpec{}, log: hclog.NewNullLogger(), tasks: []*stepTask{{pid: pid}}}
	for _, p := range s.taskPIDs() {
		s.wakeProcess(p)
	}
	select {
	case e := <-exit:
		if e.Status.ExitStatus() != 7 {
			t.Errorf("exit status %#x, want 7", uint32(e.Status))
		}
	case <-time.After(pdebugTestTimeout):
		t.Fatal("the woken task did not run to its exit")
	}
}

// TestTraceProcessSignalFirst: a signal that reaches the tracee before its
// exec stops it too; traceProcess delivers it and waits on for the exec.
func TestTraceProcessSignalFirst(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := proc.NewReaper()
	defer r.Stop()
	cmd := exec.Command("/bin/sh", "-c", `trap 'echo got USR1' USR1; kill -USR1 $$; exec sleep 30`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	exit, stop, err := r.StartTraced(cmd)
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer syscall.Kill(pid, syscall.SIGKILL)
	// sh's own exec stop, let go by hand: the USR1 and sleep's exec follow.
	select {
	case e := <-stop:
		if e.Status.StopSignal() != syscall.SIGTRAP {
			t.Fatalf("first stop %v, want SIGTRAP", e.Status.StopSignal())
		}
	case <-time.After(pdebugTestTimeout):
		t.Fatal("no stop at sh's exec")
	}
	if err := unix.PtraceCont(pid, 0); err != nil {
		t.Fatal(err)
	}
	var got []syscall.Signal
	if e, err := traceProcess(pid, stop, exit, time.Now().Add(pdebugTestTimeout), func(_ int, sig syscall.Signal) { got = append(got, sig) }); err != nil || e != nil {
		t.Fatalf("traceProcess: %v %v", e, err)
	}
	if len(got) != 1 || got[0] != syscall.SIGUSR1 {
		t.Errorf("signals delivered on the way: %v, want [SIGUSR1]", got)
	}
	waitProcState(t, pid, "T")
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if string(b) != "sleep\n" {
		t.Errorf("stopped in %q, want sleep (stopped at its exec)", b)
	}
}

// TestTraceProcessExited: a task that ends before its stop at exec is
// stock's error, with its exit status.
func TestTraceProcessExited(t *testing.T) {
	r := proc.NewReaper()
	defer r.Stop()
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	exit, stop, err := r.StartTraced(cmd) // not traced: it just exits
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	e, err := traceProcess(pid, stop, exit, time.Now().Add(pdebugTestTimeout), func(int, syscall.Signal) {})
	var ns *errTaskNotStopped
	if !errors.As(err, &ns) || e == nil {
		t.Fatalf("traceProcess: %v %v, want errTaskNotStopped", e, err)
	}
	want := []string{
		fmt.Sprintf("pdebug_trace_process WIFSTOPPED false for pid %d", pid),
		fmt.Sprintf("Process %d exited \"normally\" with return code 3", pid),
	}
	if strings.Join(ns.lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines %q, want %q", ns.lines, want)
	}
}
