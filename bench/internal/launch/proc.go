// Package launch starts and stops everything the bench measures: a private munged, a real
// slurmctld, one node daemon per implementation under test, and the limit servers. Every
// process is started here, tracked by pid and stopped by pid (SIGTERM, then SIGKILL); each
// gets PR_SET_PDEATHSIG=SIGKILL, so it dies with the bench even if the bench is killed.
//
//	           Start
//	(none) ─────────────▶ running ── Stop(SIGTERM … SIGKILL) ──▶ reaped
//	                         │                                    ▲
//	                         └──────── exits by itself ───────────┘
//
// Concurrency: a Cluster is driven from one goroutine; Proc.PID and Proc.Exited are safe
// from any goroutine.
package launch

import (
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Named timeouts.
const (
	stopTimeout = 15 * time.Second // SIGTERM → SIGKILL
	killWait    = 10 * time.Second // SIGKILL → reaped
)

// Proc is one process the bench started.
type Proc struct {
	Name    string
	Argv    []string
	Started time.Time
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // valid after done
	out     *os.File
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has been reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Status describes the process for error messages.
func (p *Proc) Status() string {
	if !p.Exited() {
		return fmt.Sprintf("%s pid %d running", p.Name, p.PID())
	}
	return fmt.Sprintf("%s pid %d exited: %v", p.Name, p.PID(), p.err)
}

func startProc(s *spawn.Spawner, name, outPath string, env []string, mod func(*exec.Cmd), argv ...string) (*Proc, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("launch: %s output: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = out, out, env
	if mod != nil {
		mod(cmd)
	}
	if err := s.Start(cmd); err != nil {
		out.Close()
		return nil, fmt.Errorf("launch: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Argv: argv, Started: time.Now(), cmd: cmd, done: make(chan struct{}), out: out}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *Proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Stop sends SIGTERM to the process (by pid, never by name or group), SIGKILL after
// stopTimeout, and waits for the reap.
func (p *Proc) Stop() error {
	if p.Exited() {
		return nil
	}
	_ = syscall.Kill(p.PID(), syscall.SIGTERM)
	if p.wait(stopTimeout) {
		return nil
	}
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	if p.wait(killWait) {
		return fmt.Errorf("launch: %s (pid %d) ignored SIGTERM for %v, killed", p.Name, p.PID(), stopTimeout)
	}
	return fmt.Errorf("launch: %s (pid %d) still there %v after SIGKILL", p.Name, p.PID(), killWait)
}

// RaiseNofile sets this process's RLIMIT_NOFILE (soft and hard) to n, so that the generator
// can hold thousands of sockets and every daemon started afterwards inherits the limit
// (setting it explicitly also stops os/exec from restoring the original soft limit in
// children). Raising the hard limit needs CAP_SYS_RESOURCE; without it the soft limit is set
// to the hard one. It returns the limit now in force.
func RaiseNofile(n uint64) (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	want := syscall.Rlimit{Cur: n, Max: max(n, rl.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want = syscall.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err2 != nil {
			return rl.Cur, fmt.Errorf("launch: raise RLIMIT_NOFILE to %d: %w", n, err)
		}
	}
	return want.Cur, nil
}
