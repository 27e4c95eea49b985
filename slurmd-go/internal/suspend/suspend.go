package suspend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-hclog"
)

// Op is what a chain does.
type Op string

// The two chains.
const (
	OpSuspend Op = "suspend"
	OpResume  Op = "resume"
)

// Errors a request gets without a chain being run (slurmstepd's
// ESLURMD_STEP_SUSPENDED and ESLURMD_STEP_NOTSUSPENDED).
var (
	ErrSuspended    = errors.New("suspend: step already suspended")
	ErrNotSuspended = errors.New("suspend: step not suspended")
	// ErrEnded: the step is being killed or has ended (Clear was called).
	ErrEnded = errors.New("suspend: step ending")
)

// Stage is one step of a chain. An error is logged and the chain goes on,
// as slurmstepd goes on to SIGSTOP when SIGTSTP fails; a stage that depends
// on the one before reads what that one left in its closure.
type Stage struct {
	Name string
	Run  func(ctx context.Context) error
}

// State is the persisted record (JSON).
type State struct {
	Op        Op       `json:"op,omitempty"`      // the last chain started
	Done      []string `json:"done,omitempty"`    // its stages run so far
	Running   bool     `json:"running,omitempty"` // it has not finished
	Suspended bool     `json:"suspended"`
	// Since is when the step was last stopped; SuspendedFor sums the
	// finished suspensions (time a step spent stopped).
	Since        time.Time     `json:"since,omitzero"`
	SuspendedFor time.Duration `json:"suspended_for,omitempty"`
}

// Chains returns the stages of each op; called for every chain run, so
// that stages may hold per-run state.
type Chains func(op Op) []Stage

// Machine serialises the chains of one step. Safe for concurrent use.
type Machine struct {
	chains Chains
	path   string // "" : not persisted
	log    hclog.Logger

	mu      sync.Mutex
	st      State         // guarded by mu
	pending Op            // the last chain started and not yet finished; guarded by mu
	queued  int           // chains started and not finished; guarded by mu
	idle    chan struct{} // closed when queued drops to 0; guarded by mu
	// last is closed when the last chain started has ended: each chain
	// waits for the one before, so chains never overlap and run in the
	// order they were asked for; guarded by mu.
	last chan struct{}
	// cleared: the step is ending; no chain starts and nothing is saved;
	// guarded by mu.
	cleared bool
}

// New returns a machine whose state is kept in path (none if empty). A
// state already in path is loaded: see Continue.
func New(chains Chains, path string, log hclog.Logger) (*Machine, error) {
	m := &Machine{chains: chains, path: path, log: log.Named("suspend")}
	if path == "" {
		return m, nil
	}
	st, err := Load(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	m.st = st
	return m, nil
}

// Load reads a persisted state.
func Load(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("suspend: %s: %w", path, err)
	}
	return st, nil
}

// State returns a copy of the current state.
func (m *Machine) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.st
	st.Done = append([]string(nil), st.Done...)
	return st
}

// Suspended says whether the step is stopped: the last suspend chain ran
// to its end and no resume chain has since.
func (m *Machine) Suspended() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Suspended
}

// beginLocked counts a chain as started and returns the end of the chain
// before it (nil: none) and its own end to close.
func (m *Machine) beginLocked(op Op) (prev, done chan struct{}) {
	m.pending = op
	m.queued++
	if m.queued == 1 {
		m.idle = make(chan struct{})
	}
	prev, done = m.last, make(chan struct{})
	m.last = done
	return prev, done
}

// Wait returns once no chain is running: a signal or terminate request
// waits for a suspend in progress, as slurmstepd's suspend mutex makes it
// wait, and then sees the step suspended.
func (m *Machine) Wait() { m.waitIdle(context.Background()) }

// waitIdle waits until no chain is running; false if ctx ended first.
func (m *Machine) waitIdle(ctx context.Context) bool {
	for {
		m.mu.Lock()
		if m.queued == 0 {
			m.mu.Unlock()
			return true
		}
		ch := m.idle
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// SuspendedFor is the time spent stopped up to now.
func (m *Machine) SuspendedFor(now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.st.SuspendedFor
	if m.st.Suspended && !m.st.Since.IsZero() {
		d += now.Sub(m.st.Since)
	}
	return d
}

// Start begins op on its own goroutine and returns a channel that gets
// nil once the chain ended, or ErrSuspended / ErrNotSuspended at once when
// there is nothing to do: a suspend of a step suspended or being
// suspended, a resume of a step neither. A resume that arrives while a
// suspend runs waits for it, as slurmstepd's suspend mutex makes it wait.
// ctx bounds the stages (each gets it); the caller's connection going
// away does not stop a chain.
func (m *Machine) Start(ctx context.Context, op Op) <-chan error {
	res := make(chan error, 1)
	m.mu.Lock()
	busy := m.pending
	switch {
	case m.cleared:
		m.mu.Unlock()
		res <- ErrEnded
		return res
	case op == OpSuspend && (busy == OpSuspend || (busy == "" && m.st.Suspended)):
		m.mu.Unlock()
		res <- ErrSuspended
		return res
	case op == OpResume && (busy == OpResume || (busy == "" && !m.st.Suspended)):
		m.mu.Unlock()
		res <- ErrNotSuspended
		return res
	case op != OpSuspend && op != OpResume:
		m.mu.Unlock()
		res <- fmt.Errorf("suspend: unknown op %q", op)
		return res
	}
	prev, done := m.beginLocked(op)
	m.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		if m.skipCleared() {
			res <- ErrEnded
			return
		}
		m.runChain(ctx, op, nil)
		res <- nil
	}()
	return res
}

// skipCleared ends a queued chain without running it once Clear was
// called (the step is being killed): it counts the chain as finished.
func (m *Machine) skipCleared() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cleared {
		return false
	}
	m.queued--
	if m.queued == 0 {
		m.pending = ""
		close(m.idle)
	}
	return true
}

// Continue finishes a chain that a persisted state shows unfinished (its
// process ended between two stages): the stages not yet done run, on the
// caller's goroutine. It reports whether there was one.
func (m *Machine) Continue(ctx context.Context) bool {
	m.mu.Lock()
	if !m.st.Running || m.pending != "" || m.cleared {
		m.mu.Unlock()
		return false
	}
	op, done := m.st.Op, append([]string(nil), m.st.Done...)
	prev, end := m.beginLocked(op)
	m.mu.Unlock()
	defer close(end)
	if prev != nil {
		<-prev
	}
	m.log.Info("continuing an interrupted chain", "op", op, "done", done)
	m.runChain(ctx, op, done)
	return true
}

// runChain runs op's stages, skipping those named in skip (done before).
func (m *Machine) runChain(ctx context.Context, op Op, skip []string) {
	m.mu.Lock()
	m.st.Op, m.st.Running = op, true
	if skip == nil {
		m.st.Done = nil
	}
	m.saveLocked()
	m.mu.Unlock()
	for _, stage := range m.chains(op) {
		if slices.Contains(skip, stage.Name) {
			continue
		}
		start := time.Now()
		if err := stage.Run(ctx); err != nil {
			m.log.Warn("stage failed", "op", op, "stage", stage.Name, "error", err)
		} else if m.log.IsTrace() {
			m.log.Trace("stage done", "op", op, "stage", stage.Name, "took", time.Since(start).String())
		}
		m.mu.Lock()
		m.st.Done = append(m.st.Done, stage.Name)
		m.saveLocked()
		m.mu.Unlock()
	}
	now := time.Now()
	m.mu.Lock()
	switch {
	case m.cleared:
		// The step is ending: Clear's state stands.
	case op == OpSuspend:
		if !m.st.Suspended {
			m.st.Since = now
		}
		m.st.Suspended = true
	case op == OpResume:
		if m.st.Suspended && !m.st.Since.IsZero() {
			m.st.SuspendedFor += now.Sub(m.st.Since)
		}
		m.st.Suspended, m.st.Since = false, time.Time{}
	}
	m.st.Running = false
	m.queued--
	if m.queued == 0 {
		m.pending = ""
		close(m.idle)
	}
	m.saveLocked()
	m.mu.Unlock()
}

// Clear forgets the suspension (the step is being killed: SIGKILL ends
// a stopped process too) once the chains in progress have ended or ctx is
// done, removes the file, and refuses every later chain (ErrEnded): a
// chain still running when ctx ends saves nothing more.
func (m *Machine) Clear(ctx context.Context) {
	m.mu.Lock()
	m.cleared = true
	m.mu.Unlock()
	if !m.waitIdle(ctx) {
		m.log.Warn("step ends with a suspend or resume chain still running")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.Suspended, m.st.Since, m.st.Running = false, time.Time{}, false
	if m.path != "" {
		if err := os.Remove(m.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("cannot remove suspend state", "path", m.path, "error", err)
		}
	}
}

// saveLocked writes the state atomically (temp file and rename), so that
// a reader never sees half a record.
func (m *Machine) saveLocked() {
	if m.path == "" || m.cleared {
		return
	}
	if err := writeAtomic(m.path, m.st); err != nil {
		m.log.Warn("cannot persist suspend state", "path", m.path, "error", err)
	}
}

func writeAtomic(path string, st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return renameio.WriteFile(path, b, 0o600, renameio.WithTempDir(filepath.Dir(path)))
}
