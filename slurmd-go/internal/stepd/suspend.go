//go:build linux

package stepd

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
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
// like the others. Under proctrack/cgroup the signals go to the step's own
// tasks and SIGSTOP is the cgroup freezer, as that plugin does; otherwise
// every process of the step is signalled (proctrack/pgid).
func (s *Step) chains(op suspend.Op) []suspend.Stage {
	if op == suspend.OpResume {
		return []suspend.Stage{{Name: StageCONT, Run: func(context.Context) error {
			err := s.suspendSignal(syscall.SIGCONT)
			s.thaw()
			if err != nil {
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
			err := s.suspendSignal(syscall.SIGTSTP)
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
			if err := s.stopAll(); err != nil {
				s.log.Info("error suspending step", "error", err)
				return err
			}
			s.log.Info("suspended step")
			return nil
		}},
	}
}

// freezes says whether suspend uses the cgroup freezer.
func (s *Step) freezes() bool { return s.spec.ProctrackCgroup && s.cg != nil }

// suspendSignal is SIGTSTP or SIGCONT as the proctrack plugin sends it.
func (s *Step) suspendSignal(sig syscall.Signal) error {
	if !s.freezes() {
		return s.signalContainer(sig)
	}
	return proc.Signal(s.ownTasks(), sig)
}

// stopAll is SIGSTOP as the proctrack plugin sends it: the freezer under
// proctrack/cgroup (SIGSTOP to everything if it fails).
func (s *Step) stopAll() error {
	if s.freezes() {
		err := s.cg.Freeze()
		if err == nil {
			s.mu.Lock()
			s.frozen = true
			s.mu.Unlock()
			return nil
		}
		s.log.Warn("cgroup freeze failed, stopping with SIGSTOP", "error", err)
	}
	return s.signalContainer(syscall.SIGSTOP)
}

// thaw undoes a freeze of stopAll.
func (s *Step) thaw() {
	s.mu.Lock()
	frozen := s.frozen
	s.frozen = false
	s.mu.Unlock()
	if frozen {
		if err := s.cg.Thaw(); err != nil {
			s.log.Warn("cgroup thaw failed", "error", err)
		}
	}
}

// ownTasks are the processes the step manager started itself (the batch
// script, or srun's tasks), not their children: proctrack/cgroup signals
// only those (_slurm_cgroup_is_pid_a_slurm_task).
func (s *Step) ownTasks() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.launch == nil {
		if s.pid > 0 && !s.exited {
			return []int{s.pid}
		}
		return nil
	}
	var out []int
	for _, t := range s.tasks {
		if t.pid > 0 && !t.exited {
			out = append(out, t.pid)
		}
	}
	return out
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
// chain in progress, as _handle_terminate, bounded by SuspendChainTimeout)
// or ends; later suspend requests get ESLURMD_STEP_NOTRUNNING.
func (s *Step) clearSuspend() {
	s.mu.Lock()
	m := s.susp
	s.mu.Unlock()
	if m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), SuspendChainTimeout)
		defer cancel()
		m.Clear(ctx)
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
	case errors.Is(err, suspend.ErrEnded):
		return -1, slurmproto.ESlurmdStepNotRunning
	case err != nil:
		return -1, int32(syscall.EINVAL)
	}
	return 0, 0
}
