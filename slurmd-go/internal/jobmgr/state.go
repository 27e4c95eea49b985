package jobmgr

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// What survives a daemon restart besides the step managers themselves:
// slurmd's cred_state: the revoked jobs, so that a launch that arrives late
// for a job already terminated is still refused after a restart, and the
// step credentials seen until they expire, so that a replayed launch is.

// CredStateFile is the file in SlurmdSpoolDir that holds the revoked jobs.
// Its own name, so that stock slurmd's binary cred_state in the same
// directory is never overwritten or misread when an admin swaps daemons.
const CredStateFile = "slurmd-go.cred_state"

// RevokedKeep is how long a revocation is remembered: far past any
// credential's lifetime (cred_expire, 120 s by default) and any launch
// still in flight.
const RevokedKeep = time.Hour

// credState is the file's JSON: job id → revocation time (Unix ns), and the
// credentials seen.
type credState struct {
	Revoked map[string]int64 `json:"revoked"`
	Creds   []credEntry      `json:"creds,omitempty"`
}

// credKey identifies a step credential as slurm_cred's cred_state does.
type credKey struct {
	step  slurmproto.StepID
	ctime int64 // Unix seconds, the wire's resolution
}

type credEntry struct {
	JobID   uint32 `json:"job_id"`
	StepID  uint32 `json:"step_id"`
	HetComp uint32 `json:"het_comp"`
	CTime   int64  `json:"ctime"`
	Expires int64  `json:"expires"` // Unix s
}

// credScanEvery spaces the purges of expired credentials (slurm_cred purges
// at most every 2 s too).
const credScanEvery = 2 * time.Second

// credSeen is Verifier.Seen: it records the credential and says whether it
// was seen before. The record reaches the state file with the next save; a
// successful launch saves, as slurmd's save_cred_state after _rpc_launch_tasks.
func (m *Manager) credSeen(step slurmproto.StepID, ctime, expires time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if now.Sub(m.lastCredScan) >= credScanEvery {
		m.lastCredScan = now
		for k, exp := range m.creds {
			if exp.Before(now) {
				delete(m.creds, k)
			}
		}
	}
	k := credKey{step: step, ctime: ctime.Unix()}
	if _, ok := m.creds[k]; ok {
		return true
	}
	m.creds[k] = expires
	return false
}

// saveStateLocked writes the revoked jobs and the credentials seen; m.mu is held. Failures are
// logged: the state is a safety net, a missing file only loses it.
func (m *Manager) saveStateLocked() {
	dir := m.cfg().SpoolDir
	if dir == "" {
		return
	}
	st := credState{Revoked: map[string]int64{}}
	cutoff := time.Now().Add(-RevokedKeep)
	for id, j := range m.jobs {
		if !j.revokedAt.IsZero() && j.revokedAt.After(cutoff) {
			st.Revoked[strconv.FormatUint(uint64(id), 10)] = j.revokedAt.UnixNano()
		}
	}
	now := time.Now()
	for k, exp := range m.creds {
		if exp.After(now) {
			st.Creds = append(st.Creds, credEntry{JobID: k.step.JobID, StepID: k.step.StepID, HetComp: k.step.StepHetComp, CTime: k.ctime, Expires: exp.Unix()})
		}
	}
	b, _ := json.Marshal(st)
	if err := renameio.WriteFile(filepath.Join(dir, CredStateFile), b, 0o600, renameio.WithTempDir(dir)); err != nil {
		m.log.Warn("cannot save credential state", "dir", dir, "error", err)
	}
}

// Recover runs once at daemon start: it restores the revoked jobs, resends
// the messages an earlier daemon still owed slurmctld and, for
// -c, terminates every step an earlier daemon left (slurmd.c
// _kill_all_active_steps with cleanstart). Each step gets StepCallTimeout.
func (m *Manager) Recover(ctx context.Context, clean bool) {
	cfg := m.cfg()
	path := filepath.Join(cfg.SpoolDir, CredStateFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		m.log.Warn("cannot read credential state", "path", path, "error", err)
	default:
		var st credState
		if err := json.Unmarshal(b, &st); err != nil {
			m.log.Warn("ignoring unreadable credential state", "path", path, "error", err)
			break
		}
		cutoff := time.Now().Add(-RevokedKeep)
		m.mu.Lock()
		n := 0
		for k, ns := range st.Revoked {
			id, err := strconv.ParseUint(k, 10, 32)
			at := time.Unix(0, ns)
			if err != nil || at.Before(cutoff) {
				continue
			}
			if _, ok := m.jobs[uint32(id)]; !ok {
				m.jobs[uint32(id)] = &job{revokedAt: at}
				n++
			}
		}
		now := time.Now()
		creds := 0
		for _, e := range st.Creds {
			if exp := time.Unix(e.Expires, 0); exp.After(now) {
				m.creds[credKey{step: slurmproto.StepID{JobID: e.JobID, StepID: e.StepID, StepHetComp: e.HetComp}, ctime: e.CTime}] = exp
				creds++
			}
		}
		m.mu.Unlock()
		m.log.Info("restored credential state", "revoked_jobs", n, "credentials", creds)
	}
	m.resendPending()
	m.resumeSuspendOps()
	refs, err := stepapi.Scan(ctx, cfg.SpoolDir, cfg.NodeName)
	if err != nil || len(refs) == 0 {
		return
	}
	if !clean {
		m.log.Info("found running steps of an earlier daemon", "steps", len(refs))
		return
	}
	// All at once: a step manager that does not answer costs StepCallTimeout
	// in total, not per step.
	var wg sync.WaitGroup
	for _, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stock sends SIGKILL as a container signal, which makes the
			// step manager print its "*** ... CANCELLED AT ... ***" line.
			err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
				return c.SignalContainer(ctx, sigKILL, 0, "", 0)
			})
			m.log.Info("clean start: killed step", "job_id", ref.StepID.JobID, "step_id", ref.StepID.StepID, "error", err)
		}()
	}
	wg.Wait()
}
