package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// clientPipeWait bounds how long a finished client's output pipes may stay open: a
// child that outlives it (srun's shepherd, which ends the allocation when srun
// dies) still holds them for a moment.
const clientPipeWait = 10 * time.Second

// BgCmd is a client command for StartClient / RunClient: Cmd plus streams and a bound.
type BgCmd struct {
	Cmd
	// StdinReader, if set, is standard input instead of Cmd.Stdin (e.g. a large
	// generated stream).
	StdinReader io.Reader
	// Stdout, if set, receives standard output instead of the capture buffer
	// (Client.Stdout and Result.Stdout then stay empty).
	Stdout io.Writer
	// Timeout is required: once it has passed the command is SIGKILLed (then, once
	// it is reaped, whatever is left of its process group) and Result.Err says so.
	Timeout time.Duration
}

// Result is how a client command ended.
type Result struct {
	Args           []string
	Stdout, Stderr string
	// ExitCode is the exit status, -1 when a signal ended the command.
	ExitCode int
	// Signal ended the command (0 if it exited).
	Signal  syscall.Signal
	Elapsed time.Duration
	// Err is nil when the command ran and ended by itself, whatever its status; it
	// is set when it could not start or was killed for its Timeout.
	Err error
}

// String describes the result for failure messages.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q: ", r.Args)
	switch {
	case r.Err != nil:
		fmt.Fprintf(&b, "%v", r.Err)
	case r.Signal != 0:
		fmt.Fprintf(&b, "killed by %v", r.Signal)
	default:
		fmt.Fprintf(&b, "exit %d", r.ExitCode)
	}
	fmt.Fprintf(&b, " after %v\nstdout: %s\nstderr: %s", r.Elapsed.Round(time.Millisecond), clip(r.Stdout), clip(r.Stderr))
	return b.String()
}

// clipLen bounds the output quoted in a failure message.
const clipLen = 4000

func clip(s string) string {
	if len(s) <= clipLen {
		return s
	}
	return "..." + s[len(s)-clipLen:]
}

// Client is a client command (srun, sattach, expect, ...) running in the background
// in its own process group. Its methods are safe from any goroutine.
type Client struct {
	Args []string
	Pid  int

	started  time.Time
	stdout   lockedBuffer
	stderr   lockedBuffer
	done     chan struct{}
	res      Result // valid after done
	timedOut atomic.Bool
	killed   atomic.Bool
}

// StartClient starts a client command against this cluster (environment and user as
// Exec) in its own process group. The group is SIGKILLed after bc.Timeout, and when
// t ends if the command still runs. Any goroutine.
func (c *Cluster) StartClient(t testing.TB, bc BgCmd) (*Client, error) {
	t.Helper()
	if bc.Timeout <= 0 {
		return nil, fmt.Errorf("cluster: StartClient %q: no Timeout", bc.Args)
	}
	cmd, err := c.command(nil, bc.Cmd)
	if err != nil {
		return nil, err
	}
	cl := &Client{Args: bc.Args, done: make(chan struct{})}
	cmd.Stdout = &cl.stdout
	if bc.Stdout != nil {
		cmd.Stdout = bc.Stdout
	}
	cmd.Stderr = &cl.stderr
	if bc.StdinReader != nil {
		cmd.Stdin = bc.StdinReader
	}
	cmd.WaitDelay = clientPipeWait
	// The spawner gives the command its own process group (what is left of it is
	// killed at the end) and PR_SET_PDEATHSIG (root commands die with the test
	// binary; setpriv's credential change clears it for other users).
	if err := c.sp.Start(cmd); err != nil {
		return nil, fmt.Errorf("cluster: start %q: %w", bc.Args, err)
	}
	cl.Pid = cmd.Process.Pid
	cl.started = time.Now()
	// The command's pid first, not its group: srun's shepherd (same group) then
	// ends the job allocation, as after a real srun crash, instead of leaving the job
	// running until the cluster stops.
	timer := time.AfterFunc(bc.Timeout, func() {
		cl.timedOut.Store(true)
		_ = syscall.Kill(cl.Pid, syscall.SIGKILL)
	})
	go func() {
		werr := cmd.Wait()
		timer.Stop()
		if cl.timedOut.Load() || cl.killed.Load() {
			// The group outlives its leader only while a member is left, so the
			// id still names this group.
			_ = syscall.Kill(-cl.Pid, syscall.SIGKILL)
		}
		r := Result{Args: bc.Args, Stdout: cl.stdout.String(), Stderr: cl.stderr.String(),
			ExitCode: -1, Elapsed: time.Since(cl.started)}
		if ps := cmd.ProcessState; ps != nil {
			r.ExitCode = ps.ExitCode()
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.Signal = ws.Signal()
			}
		}
		var ee *exec.ExitError
		switch {
		case cl.timedOut.Load():
			r.Err = fmt.Errorf("timed out after %v (SIGKILLed)", bc.Timeout)
		case cl.killed.Load():
			r.Err = errors.New("SIGKILLed by the test")
		case werr != nil && !errors.As(werr, &ee):
			r.Err = werr // e.g. exec.ErrWaitDelay: output pipes still open
		}
		cl.res = r
		close(cl.done)
	}()
	t.Cleanup(cl.Kill)
	return cl, nil
}

// RunClient is StartClient and Wait. Any goroutine.
func (c *Cluster) RunClient(t testing.TB, bc BgCmd) Result {
	t.Helper()
	cl, err := c.StartClient(t, bc)
	if err != nil {
		return Result{Args: bc.Args, ExitCode: -1, Err: err}
	}
	return cl.Wait()
}

// Stdout and Stderr are what the command printed so far.
func (cl *Client) Stdout() string { return cl.stdout.String() }
func (cl *Client) Stderr() string { return cl.stderr.String() }

// Exited reports whether the command has ended (and been reaped).
func (cl *Client) Exited() bool {
	select {
	case <-cl.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the command's pid only (not its group), unless it has ended.
func (cl *Client) Signal(sig syscall.Signal) error {
	if cl.Exited() {
		return fmt.Errorf("cluster: %q already ended", cl.Args)
	}
	return syscall.Kill(cl.Pid, sig)
}

// Kill SIGKILLs the command unless it has ended (then what is left of its process
// group), and waits for it.
func (cl *Client) Kill() {
	if cl.Exited() {
		return
	}
	cl.killed.Store(true)
	_ = syscall.Kill(cl.Pid, syscall.SIGKILL)
	<-cl.done
}

// Wait returns the result once the command has ended (at most its Timeout plus
// clientPipeWait).
func (cl *Client) Wait() Result {
	<-cl.done
	return cl.res
}

// WaitTimeout is Wait bounded by d; ok is false if the command still runs.
func (cl *Client) WaitTimeout(d time.Duration) (r Result, ok bool) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-cl.done:
		return cl.res, true
	case <-tm.C:
		return Result{}, false
	}
}

// Expect runs an expect(1) script as user in dir (clean environment, as
// Cmd.CleanEnv), bounded by timeout: for commands that need a terminal
// (srun --pty). The script is written under Dir, readable by every user. Any goroutine.
func (c *Cluster) Expect(t testing.TB, user, dir, script string, timeout time.Duration) Result {
	t.Helper()
	f, err := os.CreateTemp(c.Dir, "expect-*.exp")
	if err == nil {
		_, err = f.WriteString(script)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		return Result{Args: []string{"expect"}, ExitCode: -1, Err: fmt.Errorf("cluster: expect script: %w", err)}
	}
	return c.RunClient(t, BgCmd{
		Cmd:     Cmd{User: user, Dir: dir, CleanEnv: true, Args: []string{"expect", "-f", f.Name()}},
		Timeout: timeout,
	})
}

// command builds the exec.Cmd of a client command (environment, user through
// setpriv, directory, stdin, the cluster's root and namespace) without starting it;
// ctx (nil: none) kills it. Exec and StartClient both use it.
func (c *Cluster) command(ctx context.Context, cm Cmd) (*exec.Cmd, error) {
	if len(cm.Args) == 0 {
		return nil, errors.New("cluster: no command")
	}
	var env []string
	if cm.CleanEnv {
		env = []string{"PATH=" + CleanPath}
		if cm.User == "" || cm.User == "root" {
			env = append(env, "HOME=/root", "USER=root", "LOGNAME=root")
		}
	} else {
		env = daemonEnv()
	}
	env = append(env, "SLURM_CONF="+c.ConfPath, "SLURM_TIME_FORMAT=standard")
	s := c.spec(cm.Dir, cm.Args...)
	s.ctx = ctx
	if u := cm.User; u != "" && u != "root" {
		uid, gid, err := c.userIDs(u)
		if err != nil {
			return nil, err
		}
		s.uid, s.gid = uid, gid
		env = append(env, "USER="+u, "LOGNAME="+u, "HOME=/")
	}
	env = append(env, cm.Env...)
	cmd, err := wrapCommand(s)
	if err != nil {
		return nil, err
	}
	cmd.Env = env
	if cm.Stdin != "" {
		cmd.Stdin = strings.NewReader(cm.Stdin)
	}
	return cmd, nil
}

// lockedBuffer is a bytes.Buffer written by exec's copying goroutine and read by
// the test meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
