package jobmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Suspend and resume of a job (REQUEST_SUSPEND_INT, _rpc_suspend_job): the
// daemon answers at once and then, one operation per job at a time, sends
// REQUEST_STEP_SUSPEND or _RESUME to every step manager of the job on this
// node in parallel (each runs its own stage chain, internal/suspend). The
// operation is written to SlurmdSpoolDir/SuspendDir first and removed when
// every step has answered, so a daemon restarted in between finishes it.

// SuspendDir holds the job operations not yet finished.
const SuspendDir = "slurmd-go.suspend"

// Named timeouts of the job operation.
const (
	// SuspendStepTimeout bounds one step's suspend or resume (its chain
	// sleeps stepd.SuspendGrace).
	SuspendStepTimeout = 30 * time.Second
	// SuspendRetryAfter is the pause before a step that refused a suspend
	// (still starting) is asked once more (slurmd: 1 s).
	SuspendRetryAfter = time.Second
	// SuspendLaunchWait bounds the wait for a launch in progress before a
	// suspend (_launch_complete_wait).
	SuspendLaunchWait = time.Minute
)

// suspendOp is one job operation on disk.
type suspendOp struct {
	JobID    uint32 `json:"job_id"`
	Op       uint16 `json:"op"` // slurmproto.SuspendJob or ResumeJob
	CoreSpec uint16 `json:"core_spec"`
}

// Suspend checks a REQUEST_SUSPEND_INT (a bad op is ESLURM_NOT_SUPPORTED)
// and returns what carries it out in the background once answered.
func (m *Manager) Suspend(req *slurmproto.SuspendInt, uid uint32) (uint32, func()) {
	if req.Op != slurmproto.SuspendJob && req.Op != slurmproto.ResumeJob {
		m.log.Error("REQUEST_SUSPEND_INT: bad op code", "op", req.Op)
		return slurmproto.ESlurmNotSupported, nil
	}
	op := suspendOp{JobID: req.JobID, Op: req.Op, CoreSpec: req.JobCoreSpec}
	if req.JobID == 0 || req.JobID == slurmproto.NoVal {
		op.JobID = req.StepID.JobID
	}
	return 0, func() { m.startSuspend(op, uid) }
}

func (m *Manager) startSuspend(op suspendOp, uid uint32) {
	m.log.Debug("suspend request", "job_id", op.JobID, "uid", uid, "action", opName(op.Op))
	// Queued first, in arrival order; the worker waits for the file, which
	// is written (with an fsync) outside the lock.
	q := m.queueSuspend(queuedSuspend{op: op, ready: make(chan struct{})}, true)
	if q.path != "" {
		if err := writeSuspendOp(q.path, op); err != nil {
			m.log.Warn("cannot keep suspend operation on disk", "job_id", op.JobID, "error", err)
		}
	}
	close(q.ready)
}

func opName(op uint16) string {
	if op == slurmproto.SuspendJob {
		return "suspend"
	}
	return "resume"
}

// suspendPath names one operation's file: JOBID-SEQ, where SEQ grows in
// arrival order (and across restarts: it starts from the clock), so that
// two operations of a job queued at once keep their own files and Recover
// replays them in order.
func (m *Manager) suspendPath(jobID uint32, seq uint64) string {
	dir := m.cfg().SpoolDir
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, SuspendDir, fmt.Sprintf("%d-%020d", jobID, seq))
}

func writeSuspendOp(path string, op suspendOp) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	return renameio.WriteFile(path, b, 0o600, renameio.WithTempDir(filepath.Dir(path)))
}

// queuedSuspend is an operation waiting for its job's earlier ones.
type queuedSuspend struct {
	op    suspendOp
	path  string        // its file, removed once done ("" when not on disk)
	ready chan struct{} // closed once the file is written (or failed)
}

// queueSuspend appends the operation to its job's queue and starts the
// job's worker if none runs: one operation per job at a time, in arrival
// order (_get_suspend_job_lock). With name set, the operation's file name
// is drawn under the same lock, so that the files sort in queue order.
func (m *Manager) queueSuspend(q queuedSuspend, name bool) queuedSuspend {
	m.mu.Lock()
	if name {
		q.path = m.suspendPath(q.op.JobID, m.suspendSeq.Add(1))
	}
	pending, running := m.suspending[q.op.JobID]
	m.suspending[q.op.JobID] = append(pending, q)
	m.mu.Unlock()
	if running {
		return q
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			m.mu.Lock()
			pending := m.suspending[q.op.JobID]
			if len(pending) == 0 {
				delete(m.suspending, q.op.JobID)
				m.mu.Unlock()
				return
			}
			next := pending[0]
			m.suspending[q.op.JobID] = pending[1:]
			m.mu.Unlock()
			<-next.ready
			m.suspendJob(context.Background(), next.op)
			if next.path != "" {
				_ = os.Remove(next.path)
			}
		}
	}()
	return q
}

// suspendJob is the body of _rpc_suspend_job after the reply.
func (m *Manager) suspendJob(ctx context.Context, op suspendOp) {
	start := time.Now()
	suspending := op.Op == slurmproto.SuspendJob
	if suspending {
		wctx, cancel := context.WithTimeout(ctx, SuspendLaunchWait)
		m.waitLaunch(wctx, op.JobID)
		cancel()
	}
	refs := m.stepsOf(op.JobID)
	failed := m.suspendSteps(ctx, refs, op)
	if suspending && len(failed) > 0 {
		// A step may refuse while it starts: once more after a pause.
		select {
		case <-ctx.Done():
			return
		case <-time.After(SuspendRetryAfter):
		}
		failed = m.suspendSteps(ctx, failed, op)
	}
	for _, ref := range failed {
		m.log.Debug(opName(op.Op)+" of step failed", "job_id", op.JobID, "step_id", ref.StepID.StepID)
	}
	m.log.Debug(opName(op.Op)+" done", "job_id", op.JobID, "steps", len(refs), "took", time.Since(start).String())
}

// suspendSteps asks every step at once and returns those that failed for a
// reason worth a retry: a step already (not) suspended is done.
func (m *Manager) suspendSteps(ctx context.Context, refs []stepapi.StepRef, op suspendOp) []stepapi.StepRef {
	var (
		mu     sync.Mutex
		failed []stepapi.StepRef
		wg     sync.WaitGroup
	)
	for _, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, SuspendStepTimeout)
			defer cancel()
			c, err := stepapi.Dial(sctx, ref.Path)
			if err != nil {
				// The step is gone (finished meanwhile): nothing to stop.
				m.log.Trace("step socket unreachable", "step", ref.Path, "error", err)
				return
			}
			defer c.Close()
			if op.Op == slurmproto.SuspendJob {
				err = c.Suspend(sctx, op.CoreSpec)
			} else {
				err = c.Resume(sctx, op.CoreSpec)
			}
			var se *stepapi.StepError
			if errors.As(err, &se) && (se.Errno == slurmproto.ESlurmdStepSuspended || se.Errno == slurmproto.ESlurmdStepNotSuspended) {
				m.log.Debug("step already in that state", "job_id", op.JobID, "step_id", ref.StepID.StepID, "action", opName(op.Op))
				return
			}
			if err != nil {
				m.log.Debug(opName(op.Op)+" of step failed", "job_id", op.JobID, "step_id", ref.StepID.StepID, "error", err)
				mu.Lock()
				failed = append(failed, ref)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

// resumeSuspendOps finishes the job operations an earlier daemon left
// (called from Recover).
func (m *Manager) resumeSuspendOps() {
	dir := filepath.Join(m.cfg().SpoolDir, SuspendDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		m.log.Warn("cannot read suspend operations", "dir", dir, "error", err)
		return
	}
	// ReadDir sorts by name: a job's operations come in arrival order.
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			_ = os.Remove(path) // a write cut short (renameio's temporary file)
			continue
		}
		b, err := os.ReadFile(path)
		var op suspendOp
		if err == nil {
			err = json.Unmarshal(b, &op)
		}
		if err != nil || op.JobID == 0 {
			m.log.Warn("dropping unreadable suspend operation", "path", path, "error", err)
			_ = os.Remove(path)
			continue
		}
		m.log.Info("finishing a suspend operation of an earlier daemon", "job_id", op.JobID, "action", opName(op.Op))
		ready := make(chan struct{})
		close(ready)
		m.queueSuspend(queuedSuspend{op: op, path: path, ready: ready}, false)
	}
}
