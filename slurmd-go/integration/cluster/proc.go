package cluster

import (
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is one daemon the harness started. done is closed once it has been reaped;
// err is its exit status (valid after done).
type proc struct {
	name    string // "slurmctld", "t1", ...
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error
	out     *os.File
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startProc starts cmd with env and stdout+stderr appended to outPath and reaps it
// in the background.
func startProc(s *spawn.Spawner, name, outPath string, env []string, cmd *exec.Cmd) (*proc, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s output: %w", name, err)
	}
	fmt.Fprintf(out, "==== %s harness: exec %q\n", time.Now().Format(time.RFC3339), cmd.Args)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Env = env
	if err := s.Start(cmd); err != nil {
		out.Close()
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, started: time.Now(), done: make(chan struct{}), out: out}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the daemon's pid (never to a group or by name).
func (p *proc) signal(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	return syscall.Kill(p.pid(), sig)
}

// wait waits at most d for the daemon to be reaped.
func (p *proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the reap.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.signal(syscall.SIGTERM)
	if p.wait(grace) {
		return nil
	}
	_ = p.signal(syscall.SIGKILL)
	if p.wait(daemonKillWait) {
		return fmt.Errorf("cluster: %s (pid %d) ignored SIGTERM for %v, killed", p.name, p.pid(), grace)
	}
	return fmt.Errorf("cluster: %s (pid %d) did not exit after SIGKILL within %v", p.name, p.pid(), daemonKillWait)
}

func (p *proc) status() string {
	if !p.exited() {
		return fmt.Sprintf("%s pid %d running", p.name, p.pid())
	}
	return fmt.Sprintf("%s pid %d exited: %v", p.name, p.pid(), p.err)
}
