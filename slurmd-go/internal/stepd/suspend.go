//go:build linux

package stepd

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/suspend"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// SuspendGrace is how long suspend waits between SIGTSTP and SIGSTOP, so
// that MPI daemons stop their tasks themselves (slurmstepd: 2 s).
const SuspendGrace = 2 * time.Second

// SuspendChainTimeout bounds one chain's stages.
const SuspendChainTimeout = time.Minute

// The stage names, as they appear in the state file and the log.
const (
	StageTSTP  = "sigtstp"
	StageGrace = "grace"
	StageSTOP  = "sigstop"
	StageCONT  = "sigcont"
)

// chains are the step's suspend and resume stages (_handle_suspend,
// _handle_resume). A stage inserted here (a GPU checkpoint before
// StageSTOP, its restore after StageCONT) runs in order and is persisted
// like the others.
func (s *Step) chains(op suspend.Op) []suspend.Stage {
	if op == suspend.OpResume {
		return []suspend.Stage{{Name: StageCONT, Run: func(context.Context) error {
			if err := s.signalContainer(syscall.SIGCONT); err != nil {
				s.log.Info("error resuming step", "error", err)
				return err
			}
			s.log.Info("resumed step")
			return nil
		}}}
	}
	tstpFailed := false
	return []suspend.Stage{
		{Name: StageTSTP, Run: func(context.Context) error {
			err := s.signalContainer(syscall.SIGTSTP)
			tstpFailed = err != nil
			return err
		}},
		{Name: StageGrace, Run: func(ctx context.Context) error {
			if tstpFailed {
				return nil // slurmstepd sleeps only after a SIGTSTP that went out
			}
			t := time.NewTimer(SuspendGrace)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}},
		{Name: StageSTOP, Run: func(context.Context) error {
			if err := s.signalContainer(syscall.SIGSTOP); err != nil {
				s.log.Info("error suspending step", "error", err)
				return err
			}
			s.log.Info("suspended step")
			return nil
		}},
	}
}

// suspender returns the step's suspend machine, made on first use with its
// state file beside the socket.
func (s *Step) suspender() *suspend.Machine {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.susp != nil {
		return s.susp
	}
	path := ""
	if s.sockPath != "" {
		path = stepapi.SuspendStatePath(s.sockPath)
	}
	m, err := suspend.New(s.chains, path, s.log)
	if err != nil {
		s.log.Warn("ignoring unreadable suspend state", "path", path, "error", err)
	}
	s.susp = m
	return m
}

// isSuspended says whether signals are refused (ESLURMD_STEP_SUSPENDED),
// once a chain in progress has ended.
func (s *Step) isSuspended() bool {
	s.mu.Lock()
	m := s.susp
	s.mu.Unlock()
	if m == nil {
		return false
	}
	m.Wait()
	return m.Suspended()
}

// clearSuspend forgets a suspension when the step is killed (after a
// chain in progress, as _handle_terminate) or ends.
func (s *Step) clearSuspend() {
	s.mu.Lock()
	m := s.susp
	s.mu.Unlock()
	if m != nil {
		m.Wait()
		m.Clear()
	}
}

// handleSuspend serves REQUEST_STEP_SUSPEND and _RESUME: root or SlurmUser
// only, once the step runs; the chain runs on its own goroutine and the
// answer waits for it, as slurmstepd answers after SIGSTOP (slurmd waits
// on several steps at once). A second suspend, or a resume of a step not
// suspended, is refused without touching the processes.
func (s *Step) handleSuspend(op suspend.Op, uid uint32) (int32, int32) {
	s.log.Debug("step "+string(op)+" request", "uid", uid)
	if !s.authorized(uid) {
		return -1, int32(syscall.EPERM)
	}
	if e := s.waitRunning(); e != 0 {
		return -1, int32(e)
	}
	// The chain is not tied to the connection: a daemon that goes away
	// mid-suspend still leaves the step stopped, as it asked.
	ctx, cancel := context.WithTimeout(context.Background(), SuspendChainTimeout)
	defer cancel()
	err := <-s.suspender().Start(ctx, op)
	switch {
	case errors.Is(err, suspend.ErrSuspended):
		return -1, slurmproto.ESlurmdStepSuspended
	case errors.Is(err, suspend.ErrNotSuspended):
		return -1, slurmproto.ESlurmdStepNotSuspended
	case err != nil:
		return -1, int32(syscall.EINVAL)
	}
	return 0, 0
}
