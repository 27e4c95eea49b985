package jobmgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

type recordingRegistrar struct {
	mu       sync.Mutex
	statuses []uint32 // guarded by mu
}

func (r *recordingRegistrar) RegisterWithStatus(st uint32) {
	r.mu.Lock()
	r.statuses = append(r.statuses, st)
	r.mu.Unlock()
}

func (r *recordingRegistrar) TRES() []slurmproto.TRESRec { return nil }

// batchManager is a manager of node n2 whose slurmctld is a fake that
// records what it gets; its step manager binary (dir/stepd) does not exist
// until a test writes it.
func batchManager(t *testing.T) (m *Manager, sent <-chan slurmproto.Body, reg *recordingRegistrar, dir string) {
	t.Helper()
	return batchManagerRC(t, nil)
}

// batchManagerRC is batchManager whose slurmctld answers with rcFor's codes.
func batchManagerRC(t *testing.T, rcFor func(slurmproto.Body) uint32) (m *Manager, sent <-chan slurmproto.Body, reg *recordingRegistrar, dir string) {
	t.Helper()
	dir = t.TempDir()
	p := filepath.Join(dir, "slurm.conf")
	body := "ClusterName=c1\nSlurmctldHost=ctl\nSlurmUser=root\nNodeName=n[1-3] CPUs=1\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	conf, err := slurmconf.Load(p, slurmconf.Options{Version: slurmconf.V2205})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Resolve(config.Flags{ConfFile: p, NodeName: "n2"}, conf)
	if err != nil {
		t.Fatal(err)
	}
	a := authtest.New(0, 0)
	addr, sent := fakeCtldRC(t, a, rcFor)
	cl := ctld.New(a, func() ctld.Config { return ctld.Config{Hosts: []string{addr}, MessageTimeout: 5 * time.Second} }, hclog.NewNullLogger())
	cl.Pin(slurmproto.Version2205)
	reg = &recordingRegistrar{}
	m = New(func() *config.Config { return cfg }, cl, nil, func() int { return 1 }, filepath.Join(dir, "stepd"), reg, hclog.NewNullLogger())
	return m, sent, reg, dir
}

// TestStartBatch_ReplyNotDelivered: when slurmctld never got the answer to
// REQUEST_BATCH_JOB_LAUNCH, the launch is aborted as slurmd's
// _rpc_batch_job does: no step manager starts, slurmctld is asked to
// requeue the job held as a failed launch, and the node registers with
// SLURM_COMMUNICATIONS_SEND_ERROR.
func TestStartBatch_ReplyNotDelivered(t *testing.T) {
	m, sent, reg, dir := batchManager(t)
	// A step manager that did start would leave this file behind.
	marker := filepath.Join(dir, "stepd-ran")
	if err := os.WriteFile(m.stepdPath, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	msg := &slurmproto.BatchJobLaunch{JobID: 4242, UID: 0, GID: 0, Nodes: "n2",
		Cred: &slurmproto.Cred{StepID: slurmproto.StepID{JobID: 4242, StepID: slurmproto.StepIDBatch}}}
	if rc := m.AcceptBatch(msg); rc != 0 {
		t.Fatalf("AcceptBatch = %s", slurmproto.RCName(rc))
	}
	m.StartBatch(slurmproto.Version2205, nil, msg, errors.New("connection closed by slurmctld"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatal("the aborted launch did not finish")
	}

	var got []slurmproto.Body
	for len(sent) > 0 {
		got = append(got, <-sent)
	}
	if len(got) != 1 {
		t.Fatalf("slurmctld got %d requests (%v), want one REQUEST_JOB_REQUEUE", len(got), got)
	}
	rq, ok := got[0].(*slurmproto.JobRequeue)
	if !ok {
		t.Fatalf("slurmctld got %T, want REQUEST_JOB_REQUEUE", got[0])
	}
	if rq.JobID != 4242 || rq.Flags != jobRequeueHold|jobLaunchFailed {
		t.Errorf("requeue of job %d flags %#x, want job 4242 flags %#x", rq.JobID, rq.Flags, jobRequeueHold|jobLaunchFailed)
	}
	reg.mu.Lock()
	statuses := append([]uint32(nil), reg.statuses...)
	reg.mu.Unlock()
	if len(statuses) != 1 || statuses[0] != slurmproto.SlurmCommunicationsSendError {
		t.Errorf("registrations with status %v, want one SLURM_COMMUNICATIONS_SEND_ERROR", statuses)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a step manager was started for the aborted launch (%v)", err)
	}
	// The job is not left "launching": a launch retried by slurmctld is taken.
	if rc := m.AcceptBatch(msg); rc != 0 {
		t.Errorf("a second launch after the abort: %s", slurmproto.RCName(rc))
	}
}

// TestStartBatch_TerminateEndsUserEnv: a job terminated while its login
// shell runs (sbatch --get-user-env, then scancel) ends that wait at once
// instead of at the shell's 120 s bound, and no step manager starts.
func TestStartBatch_TerminateEndsUserEnv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("loading a user environment needs root, as slurmd: run as root (make test and CI do)")
	}
	// No step manager binary: su runs directly, and a launch that went on
	// would fail and ask slurmctld to requeue the job.
	m, sent, _, dir := batchManager(t)
	// su's stand-in says it started, then hangs as a login script can.
	m.suPath = filepath.Join(dir, "su")
	started := filepath.Join(dir, "su-started")
	if err := os.WriteFile(m.suPath, []byte("#!/bin/sh\ntouch "+started+"\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	msg := &slurmproto.BatchJobLaunch{JobID: 4243, UID: 0, GID: 0, Nodes: "n2", UserName: "root",
		Environment: []string{getUserEnvVar},
		Cred:        &slurmproto.Cred{StepID: slurmproto.StepID{JobID: 4243, StepID: slurmproto.StepIDBatch}}}
	if rc := m.AcceptBatch(msg); rc != 0 {
		t.Fatalf("AcceptBatch = %s", slurmproto.RCName(rc))
	}
	m.StartBatch(slurmproto.Version2205, nil, msg, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the login shell never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.beginTerminate(&slurmproto.KillJob{StepID: slurmproto.StepID{JobID: 4243, StepID: slurmproto.NoVal}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatal("the launch still waits on the login shell after the job was terminated")
	}
	if len(sent) != 0 {
		t.Errorf("slurmctld got %v: the terminated job's launch went on", <-sent)
	}
}

// scontrol setdebug reaches the step managers started after it, as stock's
// conf->debug_level does; -1 goes back to SlurmdDebug.
func TestSetLogLevel_NewStepManagers(t *testing.T) {
	m, _ := suspendManager(t)
	base := m.spec(stepapi.KindBatch, slurmproto.Version2205, nil).LogLevel
	m.SetLogLevel(7)
	if got := m.spec(stepapi.KindBatch, slurmproto.Version2205, nil).LogLevel; got != 7 {
		t.Errorf("after SetLogLevel(7): step manager level %d", got)
	}
	m.SetLogLevel(-1)
	if got := m.spec(stepapi.KindBatch, slurmproto.Version2205, nil).LogLevel; got != base {
		t.Errorf("after SetLogLevel(-1): level %d, want SlurmdDebug's %d", got, base)
	}
}

// A job slurmctld will not requeue (ESLURM_DISABLED: --no-requeue) after a
// failed prolog is told so and cancelled, as _launch_job_fail does: a
// REQUEST_JOB_NOTIFY "Prolog failure on node n2", then REQUEST_KILL_JOB
// (SIGKILL, by its string id).
func TestLaunchFailed_NotRequeueable(t *testing.T) {
	m, sent, _, _ := batchManagerRC(t, func(b slurmproto.Body) uint32 {
		if _, ok := b.(*slurmproto.JobRequeue); ok {
			return slurmproto.ESlurmDisabled
		}
		return 0
	})
	m.launchFailed(context.Background(), 4243, slurmproto.StepID{JobID: 4243, StepID: slurmproto.StepIDBatch}, slurmproto.ESlurmdPrologFailed)
	var got []slurmproto.Body
	for len(sent) > 0 {
		got = append(got, <-sent)
	}
	if len(got) != 3 {
		t.Fatalf("slurmctld got %v, want requeue, notify, kill", got)
	}
	if n, ok := got[1].(*slurmproto.JobNotify); !ok || n.StepID.JobID != 4243 || n.Message != "Prolog failure on node n2" {
		t.Errorf("second request %+v, want the prolog failure notice", got[1])
	}
	want := &slurmproto.KillJobRequest{StepID: slurmproto.StepID{JobID: slurmproto.NoVal, StepID: slurmproto.NoVal, StepHetComp: slurmproto.NoVal}, SJobID: "4243", Signal: 9}
	if k, ok := got[2].(*slurmproto.KillJobRequest); !ok || *k != *want {
		t.Errorf("third request %+v, want %+v", got[2], want)
	}
}
