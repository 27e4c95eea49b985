package suspend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// recorder is a chain whose stages log their names; block, when set, makes
// the named stage wait until it is closed.
type recorder struct {
	mu    sync.Mutex
	ran   []string
	block map[string]chan struct{}
	fail  string
}

func (r *recorder) chains(op Op) []Stage {
	names := []string{"tstp", "grace", "stop"}
	if op == OpResume {
		names = []string{"cont"}
	}
	var out []Stage
	for _, n := range names {
		out = append(out, Stage{Name: n, Run: func(ctx context.Context) error {
			if ch := r.block[n]; ch != nil {
				<-ch
			}
			r.mu.Lock()
			r.ran = append(r.ran, n)
			r.mu.Unlock()
			if n == r.fail {
				return errors.New("stage broke")
			}
			return nil
		}})
	}
	return out
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newMachine(t *testing.T, r *recorder, path string) *Machine {
	t.Helper()
	m, err := New(r.chains, path, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChain_OrderAndRefusals(t *testing.T) {
	r := &recorder{}
	m := newMachine(t, r, "")
	ctx := context.Background()
	if err := <-m.Start(ctx, OpResume); !errors.Is(err, ErrNotSuspended) {
		t.Fatalf("resume of a running step: %v", err)
	}
	if err := <-m.Start(ctx, OpSuspend); err != nil {
		t.Fatal(err)
	}
	if !m.Suspended() {
		t.Fatal("not suspended after the suspend chain")
	}
	if err := <-m.Start(ctx, OpSuspend); !errors.Is(err, ErrSuspended) {
		t.Fatalf("second suspend: %v", err)
	}
	if err := <-m.Start(ctx, OpResume); err != nil {
		t.Fatal(err)
	}
	if m.Suspended() {
		t.Fatal("suspended after resume")
	}
	if want := []string{"tstp", "grace", "stop", "cont"}; !equal(r.got(), want) {
		t.Fatalf("stages %v, want %v", r.got(), want)
	}
}

// A failing stage is logged and the chain goes on (SIGSTOP after a failed
// SIGTSTP), and the step ends up suspended.
func TestChain_FailedStageGoesOn(t *testing.T) {
	r := &recorder{fail: "tstp"}
	m := newMachine(t, r, "")
	if err := <-m.Start(context.Background(), OpSuspend); err != nil {
		t.Fatal(err)
	}
	if want := []string{"tstp", "grace", "stop"}; !equal(r.got(), want) || !m.Suspended() {
		t.Fatalf("stages %v suspended %v", r.got(), m.Suspended())
	}
}

// While a suspend runs, a second suspend is refused, signals are still
// taken (not yet suspended), and a resume waits for the suspend to end.
func TestChain_ResumeWaitsForRunningSuspend(t *testing.T) {
	gate := make(chan struct{})
	r := &recorder{block: map[string]chan struct{}{"grace": gate}}
	m := newMachine(t, r, "")
	ctx := context.Background()
	susp := m.Start(ctx, OpSuspend)
	if err := <-m.Start(ctx, OpSuspend); !errors.Is(err, ErrSuspended) {
		t.Fatalf("suspend during suspend: %v", err)
	}
	if m.Suspended() {
		t.Fatal("suspended before SIGSTOP")
	}
	res := m.Start(ctx, OpResume)
	select {
	case err := <-res:
		t.Fatalf("resume finished during the suspend: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-susp; err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if want := []string{"tstp", "grace", "stop", "cont"}; !equal(r.got(), want) {
		t.Fatalf("stages %v, want %v", r.got(), want)
	}
}

// The file records each stage as it is done; a new machine on the same
// file (a new process) sees the step suspended, and Continue runs only the
// stages an interrupted chain had left.
func TestChain_Persistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".node_7.0.suspend")
	gate := make(chan struct{})
	r := &recorder{block: map[string]chan struct{}{"stop": gate}}
	m := newMachine(t, r, path)
	res := m.Start(context.Background(), OpSuspend)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := Load(path)
		if err == nil && equal(st.Done, []string{"tstp", "grace"}) {
			if !st.Running || st.Suspended || st.Op != OpSuspend {
				t.Fatalf("mid-chain state %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state never showed two stages done: %+v %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// A second process loads the half-done chain and finishes it.
	r2 := &recorder{}
	m2 := newMachine(t, r2, path)
	if !m2.Continue(context.Background()) {
		t.Fatal("Continue found nothing to do")
	}
	if want := []string{"stop"}; !equal(r2.got(), want) || !m2.Suspended() {
		t.Fatalf("continued stages %v suspended %v", r2.got(), m2.Suspended())
	}
	close(gate)
	<-res

	// A third sees it suspended, resumes it, and the time stopped is kept.
	m3 := newMachine(t, &recorder{}, path)
	if !m3.Suspended() || m3.Continue(context.Background()) {
		t.Fatal("fresh machine does not see a finished suspend")
	}
	time.Sleep(20 * time.Millisecond)
	if err := <-m3.Start(context.Background(), OpResume); err != nil {
		t.Fatal(err)
	}
	st, err := Load(path)
	if err != nil || st.Suspended || st.Running || st.SuspendedFor < 20*time.Millisecond {
		t.Fatalf("after resume: %+v %v", st, err)
	}
	m3.Clear(context.Background())
	if _, err := Load(path); err == nil {
		t.Fatal("Clear left the state file")
	}
}

func TestLoad_Garbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	if err := writeAtomic(path, State{Suspended: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := Load(path); err != nil || !st.Suspended {
		t.Fatalf("%+v %v", st, err)
	}
	if err := os.WriteFile(path, []byte("{nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New((&recorder{}).chains, path, hclog.NewNullLogger()); err == nil {
		t.Fatal("garbage state accepted")
	}
}

// A signal that arrives during a suspend waits for it (Wait) and then sees
// the step suspended.
func TestChain_WaitSeesFinishedSuspend(t *testing.T) {
	gate := make(chan struct{})
	r := &recorder{block: map[string]chan struct{}{"stop": gate}}
	m := newMachine(t, r, "")
	res := m.Start(context.Background(), OpSuspend)
	seen := make(chan bool)
	go func() { m.Wait(); seen <- m.Suspended() }()
	select {
	case <-seen:
		t.Fatal("Wait returned while the chain ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if !<-seen {
		t.Fatal("not suspended once the chain ended")
	}
	<-res
}

// Clear while a chain runs: bounded by its context; the chain that ends
// later writes no state back, and no chain starts after Clear.
func TestClear_DuringChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".node_7.0.suspend")
	gate := make(chan struct{})
	r := &recorder{block: map[string]chan struct{}{"stop": gate}}
	m := newMachine(t, r, path)
	res := m.Start(context.Background(), OpSuspend)
	queued := m.Start(context.Background(), OpResume) // waits for the suspend
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	m.Clear(ctx)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("state file after Clear: %v", err)
	}
	close(gate)
	<-res
	if err := <-queued; !errors.Is(err, ErrEnded) {
		t.Fatalf("the resume queued before Clear: %v, want ErrEnded (not run)", err)
	}
	m.Wait()
	if got := r.got(); slices.Contains(got, "cont") {
		t.Fatalf("stages run %v: the queued resume ran after Clear", got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the chain ending after Clear wrote its state back: %v", err)
	}
	if st := m.State(); st.Running || st.Suspended {
		t.Fatalf("state after Clear: %+v", st)
	}
	if err := <-m.Start(context.Background(), OpResume); !errors.Is(err, ErrEnded) {
		t.Fatalf("resume after Clear: %v, want ErrEnded", err)
	}
}
