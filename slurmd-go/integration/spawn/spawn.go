// Package spawn starts test and bench daemons so that they die with the
// process that started them, even when it panics or is killed.
//
// Linux delivers PR_SET_PDEATHSIG when the *thread* that forked the child
// exits, so every child is started from one goroutine locked to its OS
// thread, which lives until Close. Children get their own process group, so
// terminal signals reach only the starting process.
package spawn

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("spawn: closed")

// Spawner starts children from its one locked thread. Safe for concurrent use.
type Spawner struct {
	reqs chan req
	quit chan struct{}
}

type req struct {
	cmd  *exec.Cmd
	resp chan error
}

// New starts the spawner's thread.
func New() *Spawner {
	s := &Spawner{reqs: make(chan req), quit: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		for {
			select {
			case r := <-s.reqs:
				r.resp <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

// Start starts cmd (in its own process group, SIGKILLed when the spawner's
// thread ends).
func (s *Spawner) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	resp := make(chan error, 1)
	select {
	case s.reqs <- req{cmd: cmd, resp: resp}:
	case <-s.quit:
		return ErrClosed
	}
	return <-resp
}

// Close ends the thread: children still running get SIGKILL. Call it after
// stopping them.
func (s *Spawner) Close() { close(s.quit) }
