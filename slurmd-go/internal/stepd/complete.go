//go:build linux

package stepd

import (
	"context"
	"fmt"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// RetrySchedule is how often and how long a message to slurmctld is
// retried while no controller answers.
type RetrySchedule struct {
	Attempts int           // total tries
	Delay    time.Duration // between tries
}

// CompleteBatchRetry is stock's schedule for REQUEST_COMPLETE_BATCH_SCRIPT
// (mgr.c: MAX_RETRY 240 retries, RETRY_DELAY 15 s: about an hour).
var CompleteBatchRetry = RetrySchedule{Attempts: 241, Delay: 15 * time.Second}

// CtldCaller sends one RPC to slurmctld and returns its reply
// (internal/ctld.Client implements it).
type CtldCaller interface {
	Call(ctx context.Context, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error)
}

// callBudget bounds one Call: every controller, each with MessageTimeout.
func (s *Step) callBudget() time.Duration {
	mt := s.spec.MessageTimeout
	if mt <= 0 {
		mt = 10 * time.Second
	}
	return time.Duration(len(s.spec.CtldHosts))*(mt+5*time.Second) + time.Second
}

// sendComplete is mgr.c _send_complete_batch_script_msg: retried while no
// controller answers; any answer ends the retries. ESLURM_ALREADY_DONE and
// ESLURM_INVALID_JOB_ID count as success (the job was killed meanwhile).
// The step manager outlives the daemon, so a daemon restart does not stop
// the retries.
func (s *Step) sendComplete(jobRC, slurmRC uint32) error {
	body := &slurmproto.CompleteBatchScript{
		JobID:    s.id.JobID,
		StepID:   s.id, // 26.05: the batch step's id, SLUID included
		JobRC:    jobRC,
		SlurmRC:  slurmRC,
		UserID:   s.uid,
		NodeName: s.spec.NodeName,
	}
	reply, err := s.callCtld(s.opts.completeRetry(), "job complete", body, auth.UIDAny)
	if err != nil {
		return fmt.Errorf("stepd: job completion: %w", err)
	}
	rc := replyRC(reply)
	switch rc {
	case slurmproto.SlurmSuccess, slurmproto.ESlurmAlreadyDone, slurmproto.ESlurmInvalidJobID:
		s.log.Debug("job complete acknowledged", "rc", slurmproto.RCName(rc))
		return nil
	}
	return fmt.Errorf("stepd: slurmctld refused job completion: %s", slurmproto.RCName(rc))
}

// callCtld sends body to slurmctld on sched until a controller answers
// and returns that answer.
func (s *Step) callCtld(sched RetrySchedule, what string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	var last error
	for i := 0; i < sched.Attempts; i++ {
		if i > 0 {
			s.log.Info("retrying RPC to slurmctld", "what", what, "attempt", i+1, "error", last)
			time.Sleep(sched.Delay)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.callBudget())
		reply, err := s.opts.Ctld.Call(ctx, body, restrictUID)
		cancel()
		if err == nil {
			return reply, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no controller answered after %d tries: %w", sched.Attempts, last)
}

func replyRC(b slurmproto.Body) uint32 {
	switch r := b.(type) {
	case *slurmproto.ReturnCode:
		return r.RC
	case *slurmproto.ReturnCodeMsg:
		return r.RC
	case slurmproto.ReturnCode:
		return r.RC
	case slurmproto.ReturnCodeMsg:
		return r.RC
	}
	return slurmproto.SlurmError
}
