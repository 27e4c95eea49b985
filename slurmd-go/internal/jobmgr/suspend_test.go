package jobmgr

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeSteps serves step sockets in spool that answer REQUEST_STEP_SUSPEND
// and _RESUME with rc 0 and record "<job>.<step> <request>".
type fakeSteps struct {
	mu  sync.Mutex
	got []string
	// hold, when set, delays every answer until it is closed.
	hold chan struct{}
}

func (f *fakeSteps) serve(t *testing.T, spool string, id slurmproto.StepID) {
	t.Helper()
	path := stepapi.SocketPath(spool, "n2", id)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				w := &stepapi.Wire{RW: c}
				if _, err := w.ReadInt32(); err != nil {
					return
				}
				var o stepapi.Out
				o.Int32(stepapi.ProtocolVersion)
				if o.Send(c) != nil {
					return
				}
				for {
					req, err := w.ReadInt32()
					if err != nil {
						return
					}
					if _, err := w.ReadUint16(); err != nil {
						return
					}
					f.mu.Lock()
					f.got = append(f.got, fmt.Sprint(id.JobID, ".", id.StepID)+" "+stepapi.Request(req).String())
					hold := f.hold
					f.mu.Unlock()
					if hold != nil {
						<-hold
					}
					var r stepapi.Out
					r.Int32(0)
					r.Int32(0)
					if r.Send(c) != nil {
						return
					}
				}
			}()
		}
	}()
}

func (f *fakeSteps) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.got
	f.got = nil
	slices.Sort(g)
	return g
}

func suspendManager(t *testing.T) (*Manager, string) {
	t.Helper()
	// Unix socket paths are short: a temp dir of its own under /tmp.
	spool, err := os.MkdirTemp("/tmp", "susp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(spool) })
	return testManagerAs(t, "SlurmdSpoolDir="+spool+"\n", slurmproto.Version2205), spool
}

func wait(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatal("background work did not end")
	}
}

// Every step of the job gets the request, no step of another job does,
// and the operation's file is gone once done.
func TestSuspend_EveryStepOfTheJob(t *testing.T) {
	m, spool := suspendManager(t)
	f := &fakeSteps{}
	batch := slurmproto.StepID{JobID: 7, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal}
	step0 := slurmproto.StepID{JobID: 7, StepID: 0, StepHetComp: slurmproto.NoVal}
	other := slurmproto.StepID{JobID: 8, StepID: 0, StepHetComp: slurmproto.NoVal}
	for _, id := range []slurmproto.StepID{batch, step0, other} {
		f.serve(t, spool, id)
	}
	for _, op := range []uint16{slurmproto.SuspendJob, slurmproto.ResumeJob} {
		rc, start := m.Suspend(&slurmproto.SuspendInt{JobID: 7, Op: op, JobCoreSpec: slurmproto.NoVal16}, 0)
		if rc != 0 || start == nil {
			t.Fatalf("op %d: rc %d", op, rc)
		}
		start()
		wait(t, m)
		name := map[uint16]string{slurmproto.SuspendJob: "REQUEST_STEP_SUSPEND", slurmproto.ResumeJob: "REQUEST_STEP_RESUME"}[op]
		want := []string{fmt.Sprint(batch.JobID, ".", batch.StepID) + " " + name, fmt.Sprint(step0.JobID, ".", step0.StepID) + " " + name}
		slices.Sort(want)
		if got := f.take(); !slices.Equal(got, want) {
			t.Errorf("op %d: steps got %q, want %q", op, got, want)
		}
		if ents, _ := os.ReadDir(filepath.Join(spool, SuspendDir)); len(ents) != 0 {
			t.Errorf("op %d: operation files left: %v", op, ents)
		}
	}
}

// A bad op is refused without work (ESLURM_NOT_SUPPORTED).
func TestSuspend_BadOp(t *testing.T) {
	m, _ := suspendManager(t)
	if rc, start := m.Suspend(&slurmproto.SuspendInt{JobID: 7, Op: 9}, 0); rc != slurmproto.ESlurmNotSupported || start != nil {
		t.Fatalf("rc %d", rc)
	}
}

// An operation an earlier daemon left on disk is carried out at Recover.
func TestSuspend_FinishedAfterRestart(t *testing.T) {
	m, spool := suspendManager(t)
	f := &fakeSteps{}
	step0 := slurmproto.StepID{JobID: 7, StepID: 0, StepHetComp: slurmproto.NoVal}
	f.serve(t, spool, step0)
	// An earlier daemon's two operations: replayed in their order.
	for seq, op := range []uint16{slurmproto.SuspendJob, slurmproto.ResumeJob} {
		if err := writeSuspendOp(m.suspendPath(7, uint64(seq+1)), suspendOp{JobID: 7, Op: op, CoreSpec: slurmproto.NoVal16}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(spool, SuspendDir, "junk"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A write cut short leaves renameio's temporary file: never replayed.
	if err := os.WriteFile(filepath.Join(spool, SuspendDir, ".7-00000000000000000003123"), []byte(`{"job_id":7,"op":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Recover(context.Background(), false)
	wait(t, m)
	f.mu.Lock()
	got := f.got
	f.mu.Unlock()
	if want := []string{"7.0 REQUEST_STEP_SUSPEND", "7.0 REQUEST_STEP_RESUME"}; !slices.Equal(got, want) {
		t.Errorf("steps got %q, want %q", got, want)
	}
	ents, _ := os.ReadDir(filepath.Join(spool, SuspendDir))
	if len(ents) != 0 {
		t.Errorf("operation files left: %v", ents)
	}
}

// Two operations of a job sent at once: each keeps its own file until it is
// done (the first's end must not remove the second's), and they run one
// after the other in arrival order.
func TestSuspend_QueuedInOrder(t *testing.T) {
	m, spool := suspendManager(t)
	f := &fakeSteps{hold: make(chan struct{})}
	f.serve(t, spool, slurmproto.StepID{JobID: 7, StepID: 0, StepHetComp: slurmproto.NoVal})
	ops := []uint16{slurmproto.SuspendJob, slurmproto.ResumeJob, slurmproto.SuspendJob}
	for _, op := range ops {
		_, start := m.Suspend(&slurmproto.SuspendInt{JobID: 7, Op: op, JobCoreSpec: slurmproto.NoVal16}, 0)
		start()
	}
	// The first is held at the step: all three are on disk.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.got)
		f.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first operation never reached the step")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ents, _ := os.ReadDir(filepath.Join(spool, SuspendDir)); len(ents) != len(ops) {
		t.Errorf("operation files while the first runs: %v, want %d", ents, len(ops))
	}
	close(f.hold)
	wait(t, m)
	f.mu.Lock()
	got := f.got
	f.mu.Unlock()
	if want := []string{"7.0 REQUEST_STEP_SUSPEND", "7.0 REQUEST_STEP_RESUME", "7.0 REQUEST_STEP_SUSPEND"}; !slices.Equal(got, want) {
		t.Errorf("steps got %q, want %q", got, want)
	}
	if ents, _ := os.ReadDir(filepath.Join(spool, SuspendDir)); len(ents) != 0 {
		t.Errorf("operation files left: %v", ents)
	}
}
