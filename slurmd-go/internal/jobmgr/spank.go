//go:build linux

package jobmgr

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/spank"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// spankHost is the node's slurmd-context SPANK runner (slurmd.c: spank_init
// at start, spank_slurmd_exit at shutdown, in the daemon's lifetime) and
// what it found: whether any plugin has job_prolog / job_epilog, so that
// the job_script stack runs only then (prep_script_slurmd.c).
type spankHost struct {
	mu                   sync.Mutex
	r                    *spank.Runner
	version              uint16 // the release it loaded the plugins for
	hasProlog, hasEpilog bool
}

// runnerPath is spank-runner next to the step manager.
func (m *Manager) runnerPath() string {
	return filepath.Join(filepath.Dir(m.stepdPath), "spank-runner")
}

// StartSpank runs the plugins' slurmd-context init when plugstack.conf
// names any, for the controller's release (plugins are refused unless built
// for it); called again when the release changes, it restarts them. A
// required plugin's failure is returned: slurmd exits on it.
func (m *Manager) StartSpank() error {
	v := m.protocol()
	m.spank.mu.Lock()
	same := m.spank.r != nil && m.spank.version == v
	m.spank.mu.Unlock()
	if same {
		return nil
	}
	m.StopSpank()
	c := m.cfg().Conf
	ok, err := spank.HasPlugins(c.PlugStackConfig)
	if err != nil || !ok {
		return err
	}
	r, err := spank.Start(spank.Config{Path: m.runnerPath(), Start: spank.StartCmd, Log: m.log.Named("spank")}, spank.Step{
		Mode: spank.ModeSlurmd, PlugStack: c.PlugStackConfig, PluginDir: c.PluginDir,
		Helper: m.stepdPath, SlurmVersion: slurmproto.ReleaseVersion(v),
	})
	if err != nil {
		return err
	}
	d, err := r.Ready()
	if err != nil {
		r.Close()
		return err
	}
	m.spank.mu.Lock()
	m.spank.r, m.spank.version, m.spank.hasProlog, m.spank.hasEpilog = r, v, d.HasProlog, d.HasEpilog
	m.spank.mu.Unlock()
	m.log.Info("spank: plugins loaded", "plugstack", c.PlugStackConfig, "job_prolog", d.HasProlog, "job_epilog", d.HasEpilog)
	return nil
}

// StopSpank runs the plugins' slurmd_exit.
func (m *Manager) StopSpank() {
	m.spank.mu.Lock()
	r := m.spank.r
	m.spank.r = nil
	m.spank.mu.Unlock()
	if r == nil {
		return
	}
	if rc, err := r.Fini(); err != nil || rc != 0 {
		m.log.Warn("spank: slurmd_exit", "rc", rc, "error", err)
	}
	r.Close()
}

// runSpankScript is `slurmstepd spank prolog|epilog`: the plugins'
// job_prolog or job_epilog with the script's environment, when a plugin has
// one. It returns a wait status as runScript does (1<<8 when a required
// plugin failed).
func (m *Manager) runSpankScript(ctx context.Context, kind string, j scriptJob, env []string) uint32 {
	m.spank.mu.Lock()
	has := m.spank.hasProlog
	if kind == "epilog" {
		has = m.spank.hasEpilog
	}
	m.spank.mu.Unlock()
	if !has {
		return 0
	}
	c := m.cfg().Conf
	mode := spank.ModeProlog
	if kind == "epilog" {
		mode = spank.ModeEpilog
	}
	r, err := spank.Start(spank.Config{Path: m.runnerPath(), Start: spank.StartCmd, Log: m.log.Named("spank")}, spank.Step{
		Mode: mode, PlugStack: c.PlugStackConfig, PluginDir: c.PluginDir,
		Helper: m.stepdPath, SlurmVersion: slurmproto.ReleaseVersion(m.protocol()),
		UID: j.UID, GID: j.GID, User: slurmproto.CString(j.UserName), JobID: j.JobID,
		StepID: slurmproto.NoVal, Env: env,
	})
	if err != nil {
		m.log.Error("spank "+kind, "job_id", j.JobID, "error", err)
		return 1 << 8
	}
	defer r.Close()
	done := make(chan struct{})
	var rc int
	go func() {
		defer close(done)
		rc, err = r.Done()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// PrologEpilogTimeout: the runner is killed with its socket.
		m.log.Error("spank "+kind+" timed out", "job_id", j.JobID)
		return 1 << 8
	}
	if err != nil || rc != 0 {
		m.log.Error("spank "+kind+" failed", "job_id", j.JobID, "rc", strconv.Itoa(rc), "error", err)
		return 1 << 8
	}
	return 0
}
