// Package jobmgr is the daemon's side of jobs: it starts step managers for
// batch jobs, runs Prolog and Epilog, signals and terminates steps through
// their sockets, and tells slurmctld when a job is gone from this node.
// The step managers themselves (internal/stepd) run in their own processes;
// this package reaches them only through internal/stepapi.
//
//	BATCH_JOB_LAUNCH ─▶ RC 0 ─▶ [prolog] ─▶ stepapi.Launch ─▶ stepd runs, reports to ctld
//	TERMINATE_JOB    ─▶ revoke ─▶ SIGCONT,SIGTERM ─▶ RC ─▶ KillWait ─▶ SIGKILL ─▶ epilog ─▶ EPILOG_COMPLETE
package jobmgr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named timeouts.
const (
	// StepCallTimeout bounds one request to a step manager's socket.
	StepCallTimeout = 10 * time.Second
	// MinKillWait is slurmd's floor on the wait between SIGTERM and SIGKILL.
	MinKillWait = 5 * time.Second
	// StepsGoneTimeout bounds the wait for step sockets to vanish after SIGKILL.
	StepsGoneTimeout = 2 * time.Minute
	// StepsGonePoll is how often that wait looks.
	StepsGonePoll = 200 * time.Millisecond
	// ScriptTimeoutUnset bounds Prolog/Epilog when PrologEpilogTimeout is unset.
	ScriptTimeoutUnset = time.Hour
	// RetryEvery is the schedule of messages slurmctld must acknowledge
	// (REQUEST_COMPLETE_PROLOG is retried every 15 s by slurmd).
	RetryEvery = 15 * time.Second
	// RetryFor bounds how long such a message is retried.
	RetryFor = time.Hour
)

// Registrar lets the job manager ask for a registration carrying a status
// (ESLURMD_PROLOG_FAILED drains the node), and tells the TRES slurmctld
// answered the last registration with (the step managers' accounting
// records list their ids).
type Registrar interface {
	RegisterWithStatus(status uint32)
	TRES() []slurmproto.TRESRec
}

// Manager tracks the jobs of this node. Safe for concurrent use.
type Manager struct {
	cfg       func() *config.Config
	ctld      *ctld.Client
	stepdPath string
	reg       Registrar
	log       hclog.Logger
	auth      auth.Authenticator // verifies step credentials' signatures
	nodeCPUs  func() int         // this node's CPU count as registered (conf->cpus)
	// libDirs returns the --send-libs directories of a step's broadcast
	// executables (SetLibDirs; nil: none).
	libDirs func(uid, job, step uint32) []string
	suPath  string // userenv.SuPath; a stand-in in tests
	// gresRecords returns the node's GRES records for the step managers
	// (SetGresRecords; nil: none).
	gresRecords func() []gres.Record
	// watcher learns of launched steps and ended jobs (SetStepWatcher;
	// nil: none).
	watcher StepWatcher
	spank   spankHost

	mu          sync.Mutex
	jobs        map[uint32]*job // guarded by mu
	terminating map[uint32]bool // guarded by mu: a terminate is in progress
	// suspending holds the operations queued behind a job's running
	// suspend or resume; a job is in it while its worker runs (suspend.go);
	// guarded by mu.
	suspending map[uint32][]queuedSuspend
	// suspendSeq numbers suspend operations' files in arrival order.
	suspendSeq atomic.Uint64
	// logLevel is the level scontrol setdebug gave the daemon, -1 none:
	// step managers started from now on log at it.
	logLevel atomic.Int32
	// creds are the step credentials verified so far, until they expire
	// (slurm_cred's state_list): one seen again is a replay.
	// cancelNotes say why this node cancelled a job (step management
	// handed to it), for its batch launch to write into the job's stderr;
	// kept apart from jobs, whose record the job's end removes before that
	// launch comes. Guarded by mu; entries older than cancelNoteTTL go.
	cancelNotes  map[uint32]cancelNote
	creds        map[credKey]time.Time // guarded by mu: → expiry
	lastCredScan time.Time             // guarded by mu
	wg           sync.WaitGroup        // background work (prolog, epilog) for Wait
}

// job is what the daemon itself knows of a job on this node; the step
// managers hold the rest.
type job struct {
	uid, gid uint32
	// revokedAt is when the job was terminated (or its Prolog failed):
	// credentials issued up to then are refused; a requeued job comes
	// back with a newer credential and starts afresh (slurm_cred_revoked).
	revokedAt    time.Time
	prologDone   chan struct{} // closed when Prolog has run (or was not needed)
	prologRC     uint32
	prologStatus uint32 // raw wait status of the Prolog
	launching    int    // batch launches in progress
	// endWait ends the launch's wait on the user's login shell when the
	// job is terminated (jobContext); nil when none is running.
	endWait context.CancelFunc
}

// jobContext is ctx, ended too when the job is terminated: a wait on the
// user's behalf (the login shell of --get-user-env) ends with the job
// instead of at its own bound.
func (m *Manager) jobContext(ctx context.Context, j *job) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if j == nil || !j.revokedAt.IsZero() {
		cancel()
		return ctx, cancel
	}
	j.endWait = cancel
	return ctx, cancel
}

// New returns a manager. stepdPath is the slurmstepd-go binary; a decodes
// step credentials; nodeCPUs is the CPU count the node registered.
func New(cfg func() *config.Config, c *ctld.Client, a auth.Authenticator, nodeCPUs func() int, stepdPath string, reg Registrar, log hclog.Logger) *Manager {
	m := &Manager{
		cfg: cfg, ctld: c, auth: a, nodeCPUs: nodeCPUs, stepdPath: stepdPath, reg: reg,
		log:         log.Named("jobmgr"),
		jobs:        map[uint32]*job{},
		creds:       map[credKey]time.Time{},
		terminating: map[uint32]bool{},
		suspending:  map[uint32][]queuedSuspend{},
		cancelNotes: map[uint32]cancelNote{},
	}
	// Operation files sort in arrival order across restarts too.
	m.suspendSeq.Store(uint64(time.Now().UnixNano()))
	m.logLevel.Store(-1)
	return m
}

// SetLogLevel sets the level of the step managers started from now on
// (REQUEST_SET_DEBUG_LEVEL); -1 goes back to SlurmdDebug and -v.
func (m *Manager) SetLogLevel(level int) { m.logLevel.Store(int32(level)) }

// SetLibDirs sets where a launch finds the library directories that
// sbcast/srun --send-libs made for its step. Call before serving.
func (m *Manager) SetLibDirs(f func(uid, job, step uint32) []string) { m.libDirs = f }

// SetGresRecords sets where launches find the node's GRES records (gres.conf
// and autodetection) that step managers bind credentials to. Call before
// serving.
func (m *Manager) SetGresRecords(f func() []gres.Record) { m.gresRecords = f }

// Wait blocks until background work has finished or ctx ends (daemon exit).
func (m *Manager) Wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// jobFor returns the record of a job, creating it; the bool says it is new.
func (m *Manager) jobFor(id, uid, gid uint32) (*job, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		j = &job{uid: uid, gid: gid}
		m.jobs[id] = j
	}
	return j, !ok
}

// incarnation returns the record for a launch whose credential was made at
// ctime: a revoked record older than the credential belongs to an earlier
// run of a requeued job and is replaced. revoked says the credential itself
// is revoked.
func (m *Manager) incarnation(id, uid, gid uint32, ctime time.Time) (j *job, revoked bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if ok && !j.revokedAt.IsZero() && ctime.After(j.revokedAt) && j.launching == 0 {
		ok = false
	}
	if !ok {
		j = &job{uid: uid, gid: gid}
		m.jobs[id] = j
	}
	return j, !j.revokedAt.IsZero()
}

func (m *Manager) lookup(id uint32) *job {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobs[id]
}

// Steps lists the live steps of this node for registration; steps that
// are not running are skipped, as slurmd does.
func (m *Manager) Steps(ctx context.Context) []slurmproto.StepID {
	cfg := m.cfg()
	refs, err := stepapi.Scan(ctx, cfg.SpoolDir, cfg.NodeName)
	if err != nil {
		m.log.Debug("no step sockets", "error", err)
		return nil
	}
	var out []slurmproto.StepID
	for _, r := range refs {
		if r.State != stepapi.StateNotRunning {
			out = append(out, r.StepID)
		}
	}
	return out
}

// stepsOf returns the step sockets of one job.
func (m *Manager) stepsOf(jobID uint32) []stepapi.StepRef {
	cfg := m.cfg()
	refs, err := stepapi.List(cfg.SpoolDir, cfg.NodeName)
	if err != nil {
		return nil
	}
	var out []stepapi.StepRef
	for _, r := range refs {
		if r.StepID.JobID == jobID {
			out = append(out, r)
		}
	}
	return out
}

// withStep runs f on a connection to one step manager.
func withStep(ctx context.Context, ref stepapi.StepRef, f func(ctx context.Context, c *stepapi.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, StepCallTimeout)
	defer cancel()
	c, err := stepapi.Dial(ctx, ref.Path)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(ctx, c)
}

// jobUID is the owner of a job: what the daemon saw at launch, else what a
// step manager says (after a daemon restart).
func (m *Manager) jobUID(ctx context.Context, jobID uint32) (uint32, bool) {
	if j := m.lookup(jobID); j != nil {
		return j.uid, true
	}
	for _, ref := range m.stepsOf(jobID) {
		var uid uint32
		if err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
			var err error
			uid, err = c.UID(ctx)
			return err
		}); err == nil {
			return uid, true
		}
	}
	return 0, false
}

// signalSteps sends sig to the job's steps, as _kill_all_active_steps:
// batch selects the batch script's step too; the KILL_JOB_BATCH and
// KILL_FULL_JOB flags select the batch step alone (its manager handles the
// rest). It returns how many steps took the signal.
func (m *Manager) signalSteps(ctx context.Context, jobID uint32, sig uint16, flags uint16, details string, batch bool, uid uint32) int {
	n, _ := m.signalStepsSuspended(ctx, jobID, sig, flags, details, batch, uid)
	return n
}

// signalStepsSuspended is signalSteps that also says whether a step refused
// the signal as suspended (ESLURMD_STEP_SUSPENDED).
func (m *Manager) signalStepsSuspended(ctx context.Context, jobID uint32, sig uint16, flags uint16, details string, batch bool, uid uint32) (int, bool) {
	allSteps, batchStep := true, batch
	suspended := false
	if flags&(slurmproto.KillJobBatch|slurmproto.KillFullJob) != 0 {
		allSteps, batchStep = false, true
	}
	n := 0
	for _, ref := range m.stepsOf(jobID) {
		isBatch := ref.StepID.StepID == slurmproto.StepIDBatch
		if !(allSteps && !isBatch) && !(batchStep && isBatch) {
			continue
		}
		err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
			return c.SignalContainer(ctx, int(sig), int(flags), details, uid)
		})
		if err != nil {
			var se *stepapi.StepError
			if errors.As(err, &se) && se.Errno == slurmproto.ESlurmdStepSuspended {
				suspended = true
			}
			m.log.Debug("signal failed", "job_id", jobID, "step_id", ref.StepID.StepID, "signal", sig, "error", err)
			continue
		}
		n++
	}
	return n, suspended
}

// retry sends body to slurmctld until it answers rc 0 (or one of ok), on
// RetryEvery, for at most RetryFor.
func (m *Manager) retry(ctx context.Context, what string, body slurmproto.Body, ok ...uint32) error {
	deadline := time.Now().Add(RetryFor)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*m.cfg().MessageTimeout())
		reply, err := m.ctld.Call(cctx, body, authUIDAny)
		cancel()
		if err == nil {
			rc := uint32(0)
			if r, isRC := reply.(*slurmproto.ReturnCode); isRC {
				rc = r.RC
			}
			if rc == 0 || contains(ok, rc) {
				return nil
			}
			err = fmt.Errorf("jobmgr: %s refused: %s", what, slurmproto.RCName(rc))
		}
		if time.Now().After(deadline) {
			return err
		}
		m.log.Warn("slurmctld did not take a message, retrying", "what", what, "retry_in", RetryEvery.String(), "error", err)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(RetryEvery):
		}
	}
}

func contains(l []uint32, v uint32) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// Signals used by the kill logic (Linux numbers; Slurm's dummy signals are
// in slurmproto).
const (
	sigKILL = 9
	sigTERM = 15
	sigCONT = 18
)
