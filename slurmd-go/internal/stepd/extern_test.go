//go:build linux

package stepd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// externBody is the REQUEST_LAUNCH_PROLOG of a one-node job on tn1.
func externBody(t *testing.T, job, uid, gid uint32, name string) []byte {
	t.Helper()
	cred := &slurmproto.Cred{
		StepID: slurmproto.StepID{JobID: job, StepID: slurmproto.StepIDExtern, StepHetComp: slurmproto.NoVal},
		UID:    uid, GID: gid,
		PwName: name, PwGecos: slurmproto.EmptyString, PwDir: "/tmp", PwShell: "/bin/sh",
		Gids: []uint32{gid}, GrNames: []string{name},
		JobCoreSpec: slurmproto.NoVal16, JobPartition: "debug",
		CTime: time.Now(), JobNHosts: 1, JobHostlist: "tn1",
	}
	m := &slurmproto.LaunchProlog{
		JobID: job, HetJobID: slurmproto.NoVal, UID: uid, GID: gid,
		Nodes: "tn1", WorkDir: "/tmp", UserName: name, Cred: cred,
	}
	b, err := slurmproto.EncodeBody(slurmproto.Version2205, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitStepComplete waits for the REQUEST_STEP_COMPLETE of step.
func (f *fakeCtld) waitStepComplete(t *testing.T, step slurmproto.StepID, timeout time.Duration) *slurmproto.StepComplete {
	t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		for _, b := range f.got {
			if c, ok := b.(*slurmproto.StepComplete); ok && c.StepID.JobID == step.JobID && c.StepID.StepID == step.StepID {
				f.mu.Unlock()
				return c
			}
		}
		f.mu.Unlock()
		select {
		case <-f.seen:
		case <-deadline:
			t.Fatalf("no REQUEST_STEP_COMPLETE for %v reached the fake slurmctld", step)
		}
	}
}

// TestE2E_ExternStep starts an extern step as slurmd-go does on
// REQUEST_LAUNCH_PROLOG with PrologFlags=Contain: it holds a root "sleep
// 100000000" in its own session and has one task (local id 0, pid -1, as
// stock's); a process handed to it with REQUEST_ADD_EXTERN_PID is listed
// and in the container; a pid that does not exist is refused; a SIGTERM
// ends the holder, then the adopted process is SIGKILLed, slurmctld gets
// the step's completion with rc 0 and the socket goes.
func TestE2E_ExternStep(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	uid, gid, name, _ := testUser(t)
	spool := t.TempDir()
	job := jobID()
	spec := testSpec(t, ctld.Addr(), spool, externBody(t, job, uid, gid, name))
	spec.Kind = stepapi.KindExtern
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := stepapi.Launch(ctx, selfBinary(t), spec)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	step := slurmproto.StepID{JobID: job, StepID: slurmproto.StepIDExtern, StepHetComp: slurmproto.NoVal}
	if want := stepapi.SocketPath(spool, "tn1", step); h.Socket != want {
		t.Errorf("socket %s, want %s", h.Socket, want)
	}
	c, err := stepapi.Dial(ctx, h.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for end := time.Now().Add(10 * time.Second); ; {
		st, err := c.State(ctx)
		if err == nil && st == stepapi.StateRunning {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("extern step not running: %v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if u, err := c.UID(ctx); err != nil || u != uid {
		t.Errorf("UID = %d %v, want %d", u, err, uid)
	}
	if tasks, err := c.TaskInfo(ctx); err != nil || !slices.Equal(tasks, []stepapi.TaskInfo{{ID: 0, GTID: 0, PID: -1}}) {
		t.Errorf("TaskInfo = %+v, %v", tasks, err)
	}
	if n, err := c.Stat(ctx); err != nil || n != 1 {
		t.Errorf("Stat = %d tasks, %v; the extern step counts its one task", n, err)
	}
	pids, err := c.ListPIDs(ctx)
	if err != nil || len(pids) != 1 {
		t.Fatalf("ListPIDs = %v, %v: want the container's sleep", pids, err)
	}
	holder := int(pids[0])
	if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(holder) + "/cmdline"); string(cmd) != "sleep\x00100000000\x00" {
		t.Errorf("container process %d runs %q", holder, cmd)
	}
	if st, err := os.Stat("/proc/" + strconv.Itoa(holder)); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("container process %d not root's: %v", holder, err)
	}

	login := exec.Command("sleep", "300")
	login.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = login.Wait(); close(exited) }()
	t.Cleanup(func() { _ = login.Process.Kill(); <-exited })
	if ok, _ := c.PidInContainer(ctx, login.Process.Pid); ok {
		t.Error("a process is in the step before it was adopted")
	}
	if err := c.AddExternPID(ctx, login.Process.Pid); err != nil {
		t.Fatalf("AddExternPID: %v", err)
	}
	if ok, err := c.PidInContainer(ctx, login.Process.Pid); err != nil || !ok {
		t.Errorf("adopted pid not in the container: %v %v", ok, err)
	}
	pids, err = c.ListPIDs(ctx)
	if err != nil || !slices.Contains(pids, uint32(login.Process.Pid)) || !slices.Contains(pids, uint32(holder)) {
		t.Errorf("ListPIDs = %v, %v: want %d and %d", pids, err, holder, login.Process.Pid)
	}
	var se *stepapi.StepError
	if err := c.AddExternPID(ctx, 1<<22+7); !errors.As(err, &se) || se.RC != -1 {
		t.Errorf("AddExternPID of no process: %v, want rc -1", err)
	}

	// slurmd's SIGTERM reaches the holder only; the login gets the
	// step's final SIGKILL, as under stock's proctrack.
	if err := c.SignalContainer(ctx, int(syscall.SIGTERM), 0, "", 0); err != nil {
		t.Fatalf("SignalContainer(SIGTERM): %v", err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted process survived the step's end")
	}
	if ws := login.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("adopted process ended with %v, want SIGKILL", login.ProcessState)
	}
	waitDead(t, holder, 10*time.Second)
	done := ctld.waitStepComplete(t, step, 20*time.Second)
	if done.StepRC != 0 || done.RangeFirst != 0 || done.RangeLast != 0 {
		t.Errorf("step complete = %+v, want rc 0 for node 0", done)
	}
	waitGone(t, h.Socket, 10*time.Second)
	waitDead(t, h.PID, 10*time.Second) // later tests list this process's descendants
}

// TestAnswerVersion: the handshake answers slurmd-go's own client (22.05)
// and 22.05 tools with 22.05, a 24.11 tool on a 24.11 node with 24.11 (so
// that its stepd_get_uid asks at all), and caps 26.05 tools at 24.11.
func TestAnswerVersion(t *testing.T) {
	for _, c := range []struct {
		node   uint16
		client int32
		want   int32
	}{
		{slurmproto.Version2205, stepapi.ProtocolVersion, 0x2600},
		{slurmproto.Version2205, 0x2A00, 0x2600},
		{slurmproto.Version2411, stepapi.ProtocolVersion, 0x2600},
		{slurmproto.Version2411, 0x2A00, 0x2A00},
		{slurmproto.Version2605, 0x2D00, 0x2A00},
		{slurmproto.Version2605, 0x2600, 0x2600},
	} {
		s := &Step{spec: &stepapi.StartSpec{ProtocolVersion: c.node}}
		if got := s.answerVersion(c.client); got != c.want {
			t.Errorf("node %#x, client %#x: answered %#x, want %#x", c.node, c.client, got, c.want)
		}
	}
}
