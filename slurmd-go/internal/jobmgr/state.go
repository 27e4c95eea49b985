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

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
)

// What survives a daemon restart besides the step managers themselves:
// the revoked jobs (slurmd's cred_state), so that a launch that arrives
// late for a job already terminated is still refused after a restart.

// CredStateFile is the file in SlurmdSpoolDir that holds the revoked jobs.
// Its own name, so that stock slurmd's binary cred_state in the same
// directory is never overwritten or misread when an admin swaps daemons.
const CredStateFile = "slurmd-go.cred_state"

// RevokedKeep is how long a revocation is remembered: far past any
// credential's lifetime (cred_expire, 120 s by default) and any launch
// still in flight.
const RevokedKeep = time.Hour

// credState is the file's JSON: job id → revocation time (Unix ns).
type credState struct {
	Revoked map[string]int64 `json:"revoked"`
}

// saveStateLocked writes the revoked jobs; m.mu is held. Failures are
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
	b, _ := json.Marshal(st)
	tmp, err := os.CreateTemp(dir, CredStateFile+".*")
	if err == nil {
		_, err = tmp.Write(b)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, CredStateFile))
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
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
		m.mu.Unlock()
		m.log.Info("restored credential state", "revoked_jobs", n)
	}
	m.resendPending()
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
