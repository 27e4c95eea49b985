package jobmgr

import (
	"context"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Base job states of kill_job_msg.job_state (slurm.h enum job_states).
const (
	jobStateBase     = 0xff
	jobStatePending  = 0
	jobStateFailed   = 5
	jobStateNodeFail = 7
)

// beginTerminate marks a job revoked and claims its termination; false
// means another terminate of the same job is already running
// (_waiter_init), and the caller just answers success.
func (m *Manager) beginTerminate(req *slurmproto.KillJob) bool {
	j, _ := m.jobFor(req.StepID.JobID, req.JobUID, req.JobGID)
	m.mu.Lock()
	defer m.mu.Unlock()
	j.revokedAt = revokeTime(req)
	if j.endWait != nil {
		j.endWait()
	}
	m.saveStateLocked()
	if m.terminating[req.StepID.JobID] {
		return false
	}
	m.terminating[req.StepID.JobID] = true
	return true
}

func (m *Manager) endTerminate(jobID uint32) {
	m.mu.Lock()
	delete(m.terminating, jobID)
	m.mu.Unlock()
}

// waitLaunch waits until no launch or Prolog of the job is in progress
// (slurmd waits for a starting step before it signals).
func (m *Manager) waitLaunch(ctx context.Context, jobID uint32) {
	t := time.NewTicker(StepsGonePoll)
	defer t.Stop()
	for {
		if !m.launching(jobID) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Terminate serves REQUEST_TERMINATE_JOB and returns the reply code at once;
// the rest (KillWait, SIGKILL, Epilog, MESSAGE_EPILOG_COMPLETE) goes on in
// the background. ESLURMD_KILL_JOB_ALREADY_COMPLETE means nothing ran and
// there is no Epilog: slurmctld takes that as the epilog completion.
func (m *Manager) Terminate(req *slurmproto.KillJob, uid uint32) uint32 {
	if !m.beginTerminate(req) {
		return 0
	}
	ctx := context.Background()
	if m.launching(req.StepID.JobID) {
		// slurmd answers at once and waits for the starting step itself.
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer m.endTerminate(req.StepID.JobID)
			m.waitLaunch(ctx, req.StepID.JobID)
			n := m.firstSignals(ctx, req, uid)
			m.finishTerminate(ctx, req, n, true)
		}()
		return 0
	}
	n := m.firstSignals(ctx, req, uid)
	if n == 0 && m.cfg().Conf.Epilog == "" {
		m.endTerminate(req.StepID.JobID)
		m.forget(req.StepID.JobID)
		return slurmproto.ESlurmdKillJobAlreadyComplete
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.endTerminate(req.StepID.JobID)
		m.finishTerminate(ctx, req, n, true)
	}()
	return 0
}

// launching reports whether a launch of the job is in progress.
func (m *Manager) launching(jobID uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[jobID]
	return j != nil && j.launching > 0
}

// firstSignals logs why the job ends into its steps, then SIGCONT and
// SIGTERM (a suspended job is terminated at once).
func (m *Manager) firstSignals(ctx context.Context, req *slurmproto.KillJob, uid uint32) int {
	id := req.StepID.JobID
	switch req.JobState & jobStateBase {
	case jobStateNodeFail:
		m.signalSteps(ctx, id, slurmproto.SigNodeFail, 0, req.Details, true, uid)
	case jobStatePending:
		m.signalSteps(ctx, id, slurmproto.SigRequeued, 0, req.Details, true, uid)
	case jobStateFailed:
		m.signalSteps(ctx, id, slurmproto.SigFailure, 0, req.Details, true, uid)
	}
	if _, suspended := m.signalStepsSuspended(ctx, id, uint16(sigCONT), 0, req.Details, true, uid); suspended {
		// _rpc_terminate_job: a suspended job gets no "nice" termination,
		// and its steps would refuse SIGTERM: REQUEST_STEP_TERMINATE
		// resumes and kills them.
		m.log.Debug("Job is currently suspended, terminating", "job_id", id)
		return m.terminateSteps(ctx, id)
	}
	return m.signalSteps(ctx, id, uint16(sigTERM), 0, req.Details, true, uid)
}

// finishTerminate waits KillWait, kills what is left, runs Epilog and
// reports the epilog completion (when report is set).
func (m *Manager) finishTerminate(ctx context.Context, req *slurmproto.KillJob, running int, report bool) {
	id := req.StepID.JobID
	if running > 0 {
		wait := m.cfg().Conf.KillWait
		if wait < MinKillWait {
			wait = MinKillWait
		}
		if !m.waitStepsGone(ctx, id, wait) {
			m.terminateSteps(ctx, id)
			m.waitStepsGone(ctx, id, StepsGoneTimeout)
		}
	}
	st := m.runJobScripts(ctx, "epilog", scriptJob{
		JobID: id, HetJobID: req.HetJobID, UID: req.JobUID, GID: req.JobGID,
		UserName: credUser(req.Cred), WorkDir: req.WorkDir, Nodes: req.Nodes,
		SpankJobEnv: req.SpankJobEnv, Cred: req.Cred,
		Epilog: true, DerivedEC: req.DerivedEC, ExitCode: req.ExitCode,
	})
	rc := uint32(0)
	if st != 0 {
		rc = slurmproto.ESlurmdEpilogFailed
	}
	m.forget(id)
	if !report {
		return
	}
	// 26.05 names the job by the terminate request's step id.
	body := &slurmproto.EpilogComplete{JobID: id, StepID: req.StepID, RC: rc, NodeName: m.cfg().NodeName}
	cctx, cancel := context.WithTimeout(ctx, 2*m.cfg().MessageTimeout())
	defer cancel()
	// Send-only, as slurmd: slurmctld resends the terminate if it is lost.
	if err := m.ctld.Send(cctx, body, m.cfg().Conf.SlurmUserID); err != nil {
		m.log.Error("unable to send epilog complete message", "job_id", id, "error", err)
	}
}

// forget drops the job's record but keeps it revoked, so a late launch of
// the same run of the job is refused.
func (m *Manager) forget(jobID uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := time.Now()
	if j := m.jobs[jobID]; j != nil && !j.revokedAt.IsZero() {
		at = j.revokedAt
	}
	m.jobs[jobID] = &job{revokedAt: at}
	m.saveStateLocked()
	if m.watcher != nil {
		m.watcher.JobEnded(jobID)
	}
}

// revokeTime is when slurmctld decided to end the job (kill_job_msg.time).
func revokeTime(req *slurmproto.KillJob) time.Time {
	if req.Time.IsZero() {
		return time.Now()
	}
	return req.Time
}

// terminateSteps SIGKILLs every step of the job (REQUEST_STEP_TERMINATE).
func (m *Manager) terminateSteps(ctx context.Context, jobID uint32) int {
	n := 0
	for _, ref := range m.stepsOf(jobID) {
		if err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error { return c.Terminate(ctx) }); err == nil {
			n++
		}
	}
	return n
}

// waitStepsGone waits up to d for the job's step sockets to disappear.
func (m *Manager) waitStepsGone(ctx context.Context, jobID uint32, d time.Duration) bool {
	deadline := time.Now().Add(d)
	t := time.NewTicker(StepsGonePoll)
	defer t.Stop()
	for {
		if len(m.stepsOf(jobID)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// Timelimit serves REQUEST_KILL_TIMELIMIT and REQUEST_KILL_PREEMPTED: the
// steps log why, then the job is terminated as by REQUEST_TERMINATE_JOB.
// The reply (RC 0) goes first.
func (m *Manager) Timelimit(req *slurmproto.KillJob, uid uint32) {
	sig := slurmproto.SigTimeLimit
	if req.Type == slurmproto.RequestKillPreempted {
		sig = slurmproto.SigPreempted
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx := context.Background()
		id := req.StepID
		if id.StepID != slurmproto.NoVal {
			for _, s := range []uint16{sig, uint16(sigCONT), uint16(sigTERM)} {
				m.signalStep(ctx, id, s, req.Details, uid)
			}
			wait := m.cfg().Conf.KillWait
			if wait < MinKillWait {
				wait = MinKillWait
			}
			time.Sleep(wait)
			m.signalStep(ctx, id, uint16(sigKILL), req.Details, uid)
			return
		}
		m.signalSteps(ctx, id.JobID, sig, 0, req.Details, true, uid)
		m.signalSteps(ctx, id.JobID, uint16(sigTERM), 0, req.Details, false, uid)
		if !m.beginTerminate(req) {
			return
		}
		defer m.endTerminate(id.JobID)
		n := m.firstSignals(ctx, req, uid)
		if n == 0 && m.cfg().Conf.Epilog == "" {
			// Nothing ran: slurmctld learns it from the epilog completion.
			m.forget(id.JobID)
			body := &slurmproto.EpilogComplete{JobID: id.JobID, StepID: req.StepID, NodeName: m.cfg().NodeName}
			cctx, cancel := context.WithTimeout(ctx, 2*m.cfg().MessageTimeout())
			defer cancel()
			if err := m.ctld.Send(cctx, body, m.cfg().Conf.SlurmUserID); err != nil {
				m.log.Error("unable to send epilog complete message", "job_id", id.JobID, "error", err)
			}
			return
		}
		m.finishTerminate(ctx, req, n, true)
	}()
}

// Abort serves REQUEST_ABORT_JOB: kill everything, run Epilog, report nothing.
func (m *Manager) Abort(req *slurmproto.KillJob, uid uint32) {
	m.beginTerminate(req)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.endTerminate(req.StepID.JobID)
		ctx := context.Background()
		n := m.signalSteps(ctx, req.StepID.JobID, slurmproto.SigAbort, 0, req.Details, true, uid)
		if n > 0 {
			m.waitStepsGone(ctx, req.StepID.JobID, StepsGoneTimeout)
		}
		m.finishTerminate(ctx, req, 0, false)
	}()
}

// signalStep signals one step (_signal_jobstep) and returns the Slurm rc.
func (m *Manager) signalStep(ctx context.Context, id slurmproto.StepID, sig uint16, details string, uid uint32) uint32 {
	if j := m.lookup(id.JobID); j != nil {
		m.mu.Lock()
		starting := j.prologDone != nil && !closed(j.prologDone)
		m.mu.Unlock()
		if starting {
			return slurmproto.ESlurmTransitionStateNoUpdate
		}
	}
	cfg := m.cfg()
	ref := stepapi.StepRef{StepID: id, Path: stepapi.SocketPath(cfg.SpoolDir, cfg.NodeName, id)}
	err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
		return c.SignalContainer(ctx, int(sig), 0, details, uid)
	})
	if err == nil {
		return 0
	}
	if _, ok := err.(*stepapi.StepError); ok {
		return slurmproto.ESlurmdJobNotRunning
	}
	return slurmproto.ESlurmInvalidJobID
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// SignalTasks serves REQUEST_SIGNAL_TASKS (scancel -s, srun's Ctrl-C).
func (m *Manager) SignalTasks(req *slurmproto.SignalTasks, uid uint32, privileged bool) uint32 {
	ctx := context.Background()
	owner, ok := m.jobUID(ctx, req.StepID.JobID)
	if !ok {
		return slurmproto.ESlurmInvalidJobID
	}
	if uid != owner && !privileged {
		m.log.Warn("signal request from a user who does not own the job", "job_id", req.StepID.JobID, "uid", uid, "owner", owner)
		return slurmproto.ESlurmUserIDMissing
	}
	switch {
	case req.Flags&(slurmproto.KillFullJob|slurmproto.KillJobBatch) != 0:
		m.signalSteps(ctx, req.StepID.JobID, req.Signal, req.Flags, "", true, uid)
	case req.Flags&slurmproto.KillStepsOnly != 0:
		m.signalSteps(ctx, req.StepID.JobID, req.Signal, req.Flags, "", false, uid)
	default:
		return m.signalStep(ctx, req.StepID, req.Signal, "", uid)
	}
	return 0
}

// TerminateTasks serves REQUEST_TERMINATE_TASKS: SIGKILL one step.
func (m *Manager) TerminateTasks(req *slurmproto.SignalTasks, uid uint32, privileged bool) uint32 {
	return m.withOwnedStep(context.Background(), req.StepID, uid, privileged, slurmproto.ESlurmUserIDMissing, func(ctx context.Context, c *stepapi.Conn) uint32 {
		if err := c.Terminate(ctx); err != nil {
			return slurmproto.ESlurmdJobNotRunning
		}
		return 0
	})
}

// Notify serves REQUEST_JOB_NOTIFY: the message goes to the batch step,
// which writes it to the job's stderr.
func (m *Manager) Notify(req *slurmproto.JobNotify, uid uint32, privileged bool) {
	ctx := context.Background()
	owner, ok := m.jobUID(ctx, req.StepID.JobID)
	if !ok {
		return
	}
	if uid != owner && !privileged {
		m.log.Error("security violation: job notify from a user who does not own the job", "job_id", req.StepID.JobID, "uid", uid)
		return
	}
	for _, ref := range m.stepsOf(req.StepID.JobID) {
		if ref.StepID.StepID != slurmproto.StepIDBatch {
			continue
		}
		if err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
			return c.Notify(ctx, slurmproto.CString(req.Message))
		}); err != nil {
			m.log.Debug("notify failed", "job_id", req.StepID.JobID, "error", err)
		}
	}
}
