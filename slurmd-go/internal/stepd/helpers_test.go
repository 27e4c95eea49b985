//go:build linux

package stepd

import (
	"context"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeCtld is a tiny slurmctld for tests: it verifies each request's munge
// credential and body hash, records the body and answers RESPONSE_SLURM_RC
// with rc (signed with munge, like slurmctld).
type fakeCtld struct {
	t    *testing.T
	ln   net.Listener
	auth auth.Authenticator
	rc   uint32

	mu   sync.Mutex
	got  []slurmproto.Body // guarded by mu
	uids []uint32          // sender uid per request; guarded by mu
	seen chan struct{}     // one send per request
}

func newFakeCtld(t *testing.T, a auth.Authenticator) *fakeCtld {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCtld{t: t, ln: ln, auth: a, seen: make(chan struct{}, 64)}
	t.Cleanup(func() { ln.Close() })
	go f.serve()
	return f
}

func (f *fakeCtld) Addr() string { return f.ln.Addr().String() }

func (f *fakeCtld) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.handle(c)
	}
}

func (f *fakeCtld) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	frame, err := slurmproto.ReadFrame(c, 0)
	if err != nil {
		f.t.Errorf("fake ctld: read: %v", err)
		return
	}
	msg, err := slurmproto.DecodeMessage(frame)
	if err != nil {
		f.t.Errorf("fake ctld: decode: %v", err)
		return
	}
	ctx := context.Background()
	cred, err := f.auth.Decode(ctx, msg.Auth.Cred)
	if err != nil {
		f.t.Errorf("fake ctld: munge: %v", err)
		return
	}
	if _, err := auth.CheckPayload(msg.Header.Version, uint16(msg.Header.MsgType), msg.Body, cred.Payload, auth.HashPolicy{BlockNullHash: true}); err != nil {
		f.t.Errorf("fake ctld: hash: %v", err)
		return
	}
	body, err := slurmproto.DecodeBody(msg.Header.Version, msg.Header.MsgType, msg.Body)
	if err != nil {
		f.t.Errorf("fake ctld: body: %v", err)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, body)
	f.uids = append(f.uids, cred.UID)
	rc := f.rc
	f.mu.Unlock()
	reply, _ := slurmproto.EncodeBody(msg.Header.Version, &slurmproto.ReturnCode{RC: rc})
	rcred, err := f.auth.Encode(ctx, auth.Payload(msg.Header.Version, uint16(slurmproto.ResponseSlurmRC), reply, auth.HashK12), auth.UIDAny)
	if err != nil {
		f.t.Errorf("fake ctld: sign reply: %v", err)
		return
	}
	h := slurmproto.Header{Version: msg.Header.Version, MsgType: slurmproto.ResponseSlurmRC}
	_, _ = c.Write(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: rcred}, reply))
	f.seen <- struct{}{}
}

// waitComplete waits for the REQUEST_COMPLETE_BATCH_SCRIPT of job.
func (f *fakeCtld) waitComplete(t *testing.T, job uint32, timeout time.Duration) *slurmproto.CompleteBatchScript {
	t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		for _, b := range f.got {
			if c, ok := b.(*slurmproto.CompleteBatchScript); ok && c.JobID == job {
				f.mu.Unlock()
				return c
			}
		}
		f.mu.Unlock()
		select {
		case <-f.seen:
		case <-deadline:
			t.Fatal("no REQUEST_COMPLETE_BATCH_SCRIPT reached the fake slurmctld")
		}
	}
}

func realMunge(t *testing.T) *munge.Munge {
	t.Helper()
	m, err := munge.New(munge.Options{AllowReplay: true})
	if err != nil {
		t.Fatalf("munge: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := m.Encode(ctx, nil, auth.UIDAny); err != nil {
		t.Fatalf("munged is needed (scripts/ensure-munged.sh): %v", err)
	}
	return m
}

// testUser is an ordinary account for the as-user tests, created if needed.
func testUser(t *testing.T) (uid, gid uint32, name, home string) {
	t.Helper()
	const n = "tieeuser"
	if _, err := user.Lookup(n); err != nil {
		if out, err := exec.Command("useradd", "-m", n).CombinedOutput(); err != nil {
			if _, lerr := user.Lookup(n); lerr != nil {
				t.Fatalf("useradd %s: %v: %s", n, err, out)
			}
		}
	}
	u, err := user.Lookup(n)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(u.Uid)
	b, _ := strconv.Atoi(u.Gid)
	return uint32(a), uint32(b), n, u.HomeDir
}

// jobOpts describes a test batch job.
type jobOpts struct {
	JobID         uint32
	UID, GID      uint32
	UserName      string
	WorkDir       string
	Script        string
	StdOut        string
	StdErr        string
	Env           []string
	ArrayJobID    uint32
	ArrayTaskID   uint32
	OpenMode      uint8
	MemMiB        uint64
	NodeName      string
	CPUsPerNode   []uint16
	CPUCountReps  []uint32
	Nodes         string
	PwDir, PwShel string
}

func launchBody(t *testing.T, o jobOpts) []byte {
	t.Helper()
	if o.ArrayTaskID == 0 {
		o.ArrayTaskID = slurmproto.NoVal
	}
	if o.CPUsPerNode == nil {
		o.CPUsPerNode, o.CPUCountReps = []uint16{1}, []uint32{1}
	}
	if o.Nodes == "" {
		o.Nodes = o.NodeName
	}
	cred := &slurmproto.Cred{
		StepID: slurmproto.StepID{JobID: o.JobID, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal},
		UID:    o.UID, GID: o.GID,
		PwName: o.UserName, PwGecos: slurmproto.EmptyString, PwDir: o.PwDir, PwShell: "/bin/sh",
		Gids: []uint32{o.GID}, GrNames: []string{o.UserName},
		JobCoreSpec: slurmproto.NoVal16, JobPartition: "debug",
		CTime: time.Now(), JobNHosts: 1, JobHostlist: o.Nodes,
	}
	if o.MemMiB > 0 {
		cred.JobMemAlloc, cred.JobMemAllocRepCount = []uint64{o.MemMiB}, []uint32{1}
	}
	env := append([]string{
		"PATH=/usr/bin:/bin", "SLURM_UMASK=0022", "SLURM_JOB_NAME=testjob",
		"SLURM_SUBMIT_DIR=" + o.WorkDir, "SLURM_SUBMIT_HOST=vm", "SLURM_PRIO_PROCESS=0",
	}, o.Env...)
	m := &slurmproto.BatchJobLaunch{
		JobID: o.JobID, HetJobID: slurmproto.NoVal, UID: o.UID, GID: o.GID,
		Partition: "debug", NTasks: 0, PnMinMemory: 100 | slurmproto.MemPerCPU,
		OpenMode: o.OpenMode, ArrayJobID: o.ArrayJobID, ArrayTaskID: o.ArrayTaskID,
		CPUBindType: 0, CPUsPerTask: slurmproto.NoVal16, JobCoreSpec: slurmproto.NoVal16,
		CPUsPerNode: o.CPUsPerNode, CPUCountReps: o.CPUCountReps,
		Nodes: o.Nodes, Script: o.Script, WorkDir: o.WorkDir,
		StdOut: o.StdOut, StdErr: o.StdErr,
		Argv: []string{"/path/to/submitted"}, Environment: env,
		JobMem: o.MemMiB, Cred: cred, SelectPluginID: slurmproto.SelectPluginConsTres,
	}
	b, err := slurmproto.EncodeBody(slurmproto.Version2205, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testSpec is a StartSpec for a job on node "tn1" with a fake slurmctld.
func testSpec(t *testing.T, ctldAddr, spool string, body []byte) stepapi.StartSpec {
	host, _ := os.Hostname()
	return stepapi.StartSpec{
		SpecVersion: stepapi.SpecVersion, Kind: stepapi.KindBatch,
		NodeName: "tn1", Hostname: host, ClusterName: "tc",
		ConfFile: "/etc/slurm/slurm.conf", SpoolDir: spool,
		CtldHosts: []string{ctldAddr}, MessageTimeout: 5 * time.Second,
		MungeAllowReplay: true,
		KillWait:         time.Second,
		LogFile:          filepath.Join(spool, "stepd.log"), LogLevel: 6,
		WorkingCluster: "tc:127.0.0.1:6817:9728:109",
		TopologyAddr:   "tn1", TopologyPattern: "node",
		CgroupRoot:      "tiee-test/tn1",
		ProtocolVersion: slurmproto.Version2205,
		LaunchBody:      body,
	}
}
