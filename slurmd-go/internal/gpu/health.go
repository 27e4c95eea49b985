package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-hclog"
)

// Drainer drains and resumes this node at slurmctld (the daemon wires it to
// the update-node RPC).
type Drainer interface {
	// Drain sets the node DRAIN with reason (replacing a reason this
	// daemon set before).
	Drain(ctx context.Context, reason string) error
	// Resume clears the drain, but only if the node's current reason is
	// reason: a drain an administrator (or anything else) set stays.
	Resume(ctx context.Context, reason string) error
}

// ReasonPrefix starts every drain reason health sets.
const ReasonPrefix = "gpu: "

// Named timeouts.
const (
	// DrainTimeout bounds one Drain or Resume call.
	DrainTimeout = 10 * time.Second
	// DrainRetry is how long health waits before retrying a failed call.
	DrainRetry = 30 * time.Second
)

// maxReasonFaults caps the faults named in a reason; the rest are counted.
const maxReasonFaults = 3

// HealthConfig configures Health.
type HealthConfig struct {
	Drainer Drainer
	// StatePath keeps the reason this daemon drained the node with, so
	// that a restarted daemon still knows the drain is its own ("" keeps
	// it in memory only).
	StatePath string
	Logger    hclog.Logger
	// Retry overrides DrainRetry (tests).
	Retry time.Duration
}

// Health turns GPU events into drains: a fault drains the node with a
// "gpu: GPU <i> (<bus id>): <detail>" reason; when every fault is gone it
// resumes the node, with the reason it set, so only its own drain is
// cleared. XID and ECC faults last until the daemon restarts (after the
// GPU was reset or replaced); row-remap and fabric faults clear when NVML
// reports them healthy. A drain left by an earlier run (StatePath) is
// resumed once the first poll (CauseSync) finds no fault.
type Health struct {
	cfg HealthConfig
	log hclog.Logger

	mu     sync.Mutex
	faults map[string]Event // guarded by mu; key: GPU index + cause
	set    string           // guarded by mu; the reason the node is drained with by us, "" if none
	want   string           // guarded by mu; the reason it should have, "" for resumed
	synced bool             // guarded by mu
}

// NewHealth builds the policy; it reads StatePath.
func NewHealth(cfg HealthConfig) (*Health, error) {
	if cfg.Drainer == nil {
		return nil, errors.New("gpu: health needs a Drainer")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DrainRetry
	}
	h := &Health{cfg: cfg, log: cfg.Logger.Named("gpu.health"), faults: map[string]Event{}}
	if cfg.StatePath != "" {
		b, err := os.ReadFile(cfg.StatePath)
		switch {
		case err == nil:
			h.set = strings.TrimSpace(string(b))
			h.want = h.set // until the first poll says otherwise
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("gpu: health state %s: %w", cfg.StatePath, err)
		}
	}
	return h, nil
}

// Run applies events until the channel closes or ctx ends. One goroutine.
func (h *Health) Run(ctx context.Context, events <-chan Event) error {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-events:
			if !ok {
				return nil
			}
			h.apply(e)
		case <-retry:
		}
		retry = nil
		if err := h.reconcile(ctx); err != nil {
			h.log.Warn("drain state not applied; will retry", "error", err, "retry", h.cfg.Retry)
			retry = time.After(h.cfg.Retry)
		}
	}
}

// Faults returns the current faults' reasons, sorted. Any goroutine.
func (h *Health) Faults() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.describeLocked()
}

// Drained returns the reason the node is drained with by this daemon, ""
// if none. Any goroutine.
func (h *Health) Drained() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.set
}

func faultKey(e Event) string { return fmt.Sprintf("%d/%s", e.Index, e.Cause) }

func (h *Health) apply(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case e.Cause == CauseSync:
		h.synced = true
	case e.Healthy:
		delete(h.faults, faultKey(e))
		h.log.Info("GPU healthy again", "gpu", e.Index, "cause", e.Cause, "detail", e.Detail)
	default:
		h.faults[faultKey(e)] = e
		h.log.Error("GPU fault", "gpu", e.Index, "uuid", e.UUID, "pci_bus_id", e.PCIBusID, "cause", e.Cause, "detail", e.Detail)
	}
	if len(h.faults) > 0 {
		h.want = h.reasonLocked()
	} else if h.synced || h.set == "" {
		h.want = ""
	}
}

func (h *Health) describeLocked() []string {
	var out []string
	for _, e := range h.faults {
		out = append(out, describe(e))
	}
	sort.Strings(out)
	return out
}

func describe(e Event) string {
	if e.Index < 0 {
		return "all GPUs: " + e.Detail
	}
	if e.PCIBusID != "" {
		return fmt.Sprintf("GPU %d (%s): %s", e.Index, e.PCIBusID, e.Detail)
	}
	return fmt.Sprintf("GPU %d: %s", e.Index, e.Detail)
}

func (h *Health) reasonLocked() string {
	d := h.describeLocked()
	if len(d) > maxReasonFaults {
		d = append(d[:maxReasonFaults], fmt.Sprintf("+%d more", len(d)-maxReasonFaults))
	}
	return ReasonPrefix + strings.Join(d, "; ")
}

// reconcile makes the node's drain match want.
func (h *Health) reconcile(ctx context.Context) error {
	h.mu.Lock()
	want, set := h.want, h.set
	h.mu.Unlock()
	if want == set {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, DrainTimeout)
	defer cancel()
	if want != "" {
		if err := h.cfg.Drainer.Drain(cctx, want); err != nil {
			return fmt.Errorf("gpu: drain %q: %w", want, err)
		}
		h.log.Warn("node drained", "reason", want)
	} else {
		if err := h.cfg.Drainer.Resume(cctx, set); err != nil {
			return fmt.Errorf("gpu: resume %q: %w", set, err)
		}
		h.log.Info("node resumed", "reason", set)
	}
	if err := h.persist(want); err != nil {
		return err
	}
	h.mu.Lock()
	h.set = want
	h.mu.Unlock()
	return nil
}

func (h *Health) persist(reason string) error {
	if h.cfg.StatePath == "" {
		return nil
	}
	if reason == "" {
		if err := os.Remove(h.cfg.StatePath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("gpu: health state: %w", err)
		}
		return nil
	}
	if err := renameio.WriteFile(h.cfg.StatePath, []byte(reason+"\n"), 0o600); err != nil {
		return fmt.Errorf("gpu: health state: %w", err)
	}
	return nil
}

// RunHealth watches w and applies the drain policy until ctx ends (the
// daemon's one call: a Null provider's stream just ends with ctx).
func RunHealth(ctx context.Context, w Watcher, cfg HealthConfig) error {
	h, err := NewHealth(cfg)
	if err != nil {
		return err
	}
	ch, err := w.Watch(ctx)
	if err != nil {
		return fmt.Errorf("gpu: health: %w", err)
	}
	return h.Run(ctx, ch)
}
