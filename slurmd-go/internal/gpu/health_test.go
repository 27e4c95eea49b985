package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

type call struct{ op, reason string }

// fakeDrainer records calls; fail makes the next n calls fail.
type fakeDrainer struct {
	mu    sync.Mutex
	calls []call
	fail  int
	got   chan call
}

func newFakeDrainer() *fakeDrainer { return &fakeDrainer{got: make(chan call, 64)} }

func (d *fakeDrainer) do(op, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail > 0 {
		d.fail--
		d.got <- call{op + "-failed", reason}
		return errors.New("ctld unreachable")
	}
	d.calls = append(d.calls, call{op, reason})
	d.got <- call{op, reason}
	return nil
}
func (d *fakeDrainer) Drain(_ context.Context, r string) error  { return d.do("drain", r) }
func (d *fakeDrainer) Resume(_ context.Context, r string) error { return d.do("resume", r) }

func (d *fakeDrainer) Calls() []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]call(nil), d.calls...)
}

func (d *fakeDrainer) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-d.got:
		return c
	case <-time.After(waitTimeout):
		t.Fatalf("no Drain/Resume within %v", waitTimeout)
		return call{}
	}
}

// runHealth feeds events through Run synchronously (unbuffered channel)
// and returns once Run has consumed all of them and returned.
func runHealth(t *testing.T, h *Health, events ...Event) {
	t.Helper()
	ch := make(chan Event)
	done := make(chan error, 1)
	go func() { done <- h.Run(context.Background(), ch) }()
	for _, e := range events {
		ch <- e
	}
	close(ch)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return")
	}
}

var (
	xid79  = Event{Index: 3, PCIBusID: "00000000:5D:00.0", Cause: CauseXID, Detail: "XID 79"}
	remap5 = Event{Index: 5, PCIBusID: "00000000:AB:00.0", Cause: CauseRowRemap, Detail: "row remapping failure"}
	sync0  = Event{Index: -1, Cause: CauseSync}
)

func healed(e Event) Event { e.Healthy = true; return e }

func TestHealth_Policy(t *testing.T) {
	const r79 = "gpu: GPU 3 (00000000:5D:00.0): XID 79"
	const r5 = "gpu: GPU 5 (00000000:AB:00.0): row remapping failure"
	const both = "gpu: GPU 3 (00000000:5D:00.0): XID 79; GPU 5 (00000000:AB:00.0): row remapping failure"
	cases := []struct {
		name   string
		events []Event
		want   []call
	}{
		{"no fault, no call (an admin drain stays)", []Event{sync0, healed(remap5)}, nil},
		{"xid drains and stays", []Event{sync0, xid79}, []call{{"drain", r79}}},
		{"a repeated XID keeps one drain", []Event{sync0, xid79, xid79}, []call{{"drain", r79}}},
		{"remap drains and resumes with our reason", []Event{sync0, remap5, healed(remap5)}, []call{{"drain", r5}, {"resume", r5}}},
		{"two faults, one heals: reason narrows, no resume", []Event{sync0, xid79, remap5, healed(remap5)},
			[]call{{"drain", r79}, {"drain", both}, {"drain", r79}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newFakeDrainer()
			h, err := NewHealth(HealthConfig{Drainer: d})
			if err != nil {
				t.Fatal(err)
			}
			runHealth(t, h, c.events...)
			if got := d.Calls(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("calls = %v\nwant    %v", got, c.want)
			}
		})
	}
}

// TestHealth_Restart: a drain left by an earlier run (state file) is
// resumed once the first poll finds the GPUs healthy, and kept (replaced)
// when a fault is found.
func TestHealth_Restart(t *testing.T) {
	const old = "gpu: GPU 3 (00000000:5D:00.0): XID 79"
	for _, c := range []struct {
		name   string
		events []Event
		want   []call
		left   string
	}{
		{"healthy after restart", []Event{sync0}, []call{{"resume", old}}, ""},
		{"still faulty", []Event{remap5, sync0}, []call{{"drain", "gpu: GPU 5 (00000000:AB:00.0): row remapping failure"}},
			"gpu: GPU 5 (00000000:AB:00.0): row remapping failure\n"},
		{"nothing before the first poll", nil, nil, old + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "gpu-drain")
			if err := os.WriteFile(state, []byte(old+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			d := newFakeDrainer()
			h, err := NewHealth(HealthConfig{Drainer: d, StatePath: state})
			if err != nil {
				t.Fatal(err)
			}
			runHealth(t, h, c.events...)
			if got := d.Calls(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("calls = %v, want %v", got, c.want)
			}
			b, err := os.ReadFile(state)
			if c.left == "" {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("state file should be gone: %q %v", b, err)
				}
			} else if string(b) != c.left {
				t.Fatalf("state = %q, want %q", b, c.left)
			}
		})
	}
}

// TestHealth_Retry: a failed Drain is retried after Retry.
func TestHealth_Retry(t *testing.T) {
	d := newFakeDrainer()
	d.fail = 1
	h, err := NewHealth(HealthConfig{Drainer: d, Retry: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan Event, 2)
	ch <- sync0
	ch <- xid79
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx, ch)
	if c := d.next(t); c.op != "drain-failed" {
		t.Fatalf("first call %v", c)
	}
	if c := d.next(t); c.op != "drain" || !strings.HasPrefix(c.reason, ReasonPrefix+"GPU 3") {
		t.Fatalf("retry %v", c)
	}
	// Health records the drain once Drain has returned: wait for it.
	deadline := time.Now().Add(drainedTimeout)
	for got := h.Drained(); !strings.Contains(got, "XID 79"); got = h.Drained() {
		if time.Now().After(deadline) {
			t.Fatalf("Drained = %q after %v", got, drainedTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// drainedTimeout bounds the wait for Health to record a drain.
const drainedTimeout = 5 * time.Second

func TestHealth_ReasonCapped(t *testing.T) {
	d := newFakeDrainer()
	h, _ := NewHealth(HealthConfig{Drainer: d})
	var evs []Event
	for i := 0; i < 5; i++ {
		evs = append(evs, Event{Index: i, Cause: CauseXID, Detail: "XID 79"})
	}
	runHealth(t, h, append([]Event{sync0}, evs...)...)
	calls := d.Calls()
	last := calls[len(calls)-1].reason
	if want := "gpu: GPU 0: XID 79; GPU 1: XID 79; GPU 2: XID 79; +2 more"; last != want {
		t.Fatalf("reason %q, want %q", last, want)
	}
}
