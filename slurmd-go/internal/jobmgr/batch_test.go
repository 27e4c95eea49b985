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

// TestStartBatch_ReplyNotDelivered: when slurmctld never got the answer to
// REQUEST_BATCH_JOB_LAUNCH, the launch is aborted as slurmd's
// _rpc_batch_job does: no step manager starts, slurmctld is asked to
// requeue the job held as a failed launch, and the node registers with
// SLURM_COMMUNICATIONS_SEND_ERROR.
func TestStartBatch_ReplyNotDelivered(t *testing.T) {
	dir := t.TempDir()
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
	addr, sent := fakeCtld(t, a)
	cl := ctld.New(a, func() ctld.Config { return ctld.Config{Hosts: []string{addr}, MessageTimeout: 5 * time.Second} }, hclog.NewNullLogger())
	cl.Pin(slurmproto.Version2205)
	// A step manager that did start would leave this file behind.
	marker := filepath.Join(dir, "stepd-ran")
	stepd := filepath.Join(dir, "stepd")
	if err := os.WriteFile(stepd, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := &recordingRegistrar{}
	m := New(func() *config.Config { return cfg }, cl, nil, func() int { return 1 }, stepd, reg, hclog.NewNullLogger())

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
