//go:build linux

package stepd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/suspend"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// serverStep is a Step whose "job" is a sleep in its own session, serving
// the stock socket protocol in-process (no job manager).
func serverStep(t *testing.T) (*Step, *exec.Cmd) {
	t.Helper()
	spool := t.TempDir()
	job := exec.Command("sleep", "60")
	job.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = job.Process.Kill(); _ = job.Wait() })
	stderr, err := os.Create(filepath.Join(spool, "job.err"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stderr.Close() })
	cred := &slurmproto.Cred{PwName: "alice", PwGecos: "Alice", PwDir: "/home/alice", PwShell: "/bin/bash",
		Gids: []uint32{1500, 27}, GrNames: []string{"alice", "sudo"}}
	s := &Step{
		spec: &stepapi.StartSpec{NodeName: "n9", SpoolDir: spool, SlurmUserUID: 64030, KillWait: 100 * time.Millisecond},
		msg:  &slurmproto.BatchJobLaunch{JobID: 77, Cred: cred},
		opts: Options{RunningWait: 200 * time.Millisecond},
		log:  hclog.NewNullLogger(),
		id:   slurmproto.StepID{JobID: 77, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal},
		uid:  uint32(os.Getuid()), gid: 1500, gids: cred.Gids, grNames: cred.GrNames,
		userName: "alice", pwGecos: "Alice", pwDir: "/home/alice", pwShell: "/bin/bash",
		jobMemMiB: 2048, stepMemMiB: 1024,
		state: stepapi.StateStarting, stateCh: make(chan struct{}),
		pid: job.Process.Pid, stderr: stderr,
	}
	if err := s.listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeSocket)
	return s, job
}

// TestServer_RoundTrips exercises every request of the client against the
// server.
func TestServer_RoundTrips(t *testing.T) {
	s, job := serverStep(t)
	ctx := context.Background()
	c, err := stepapi.Dial(ctx, s.sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ServerVersion() != stepapi.ProtocolVersion {
		t.Errorf("server version %#x", c.ServerVersion())
	}
	if st, err := c.State(ctx); err != nil || st != stepapi.StateStarting {
		t.Fatalf("State = %v, %v", st, err)
	}
	// Signals wait for Running, then give up with ESLURMD_JOB_NOTRUNNING.
	err = c.SignalContainer(ctx, int(syscall.SIGUSR1), 0, "", 0)
	var se *stepapi.StepError
	if !errors.As(err, &se) || se.Errno != slurmproto.ESlurmdJobNotRunning {
		t.Fatalf("signal before running: %v", err)
	}
	s.setState(stepapi.StateRunning)

	if d, err := c.DaemonPID(ctx); err != nil || d != os.Getpid() {
		t.Errorf("DaemonPID = %d, %v", d, err)
	}
	if ok, err := c.PidInContainer(ctx, job.Process.Pid); err != nil || !ok {
		t.Errorf("PidInContainer(job) = %v, %v", ok, err)
	}
	if ok, err := c.PidInContainer(ctx, os.Getpid()); err != nil || ok {
		t.Errorf("PidInContainer(self) = %v, %v", ok, err)
	}
	pids, err := c.ListPIDs(ctx)
	if err != nil || len(pids) != 1 || int(pids[0]) != job.Process.Pid {
		t.Errorf("ListPIDs = %v, %v (job %d)", pids, err, job.Process.Pid)
	}
	tasks, err := c.TaskInfo(ctx)
	if err != nil || len(tasks) != 1 || tasks[0] != (stepapi.TaskInfo{PID: int32(job.Process.Pid)}) {
		t.Errorf("TaskInfo = %+v, %v", tasks, err)
	}
	if j, st, err := c.MemLimits(ctx); err != nil || j != 2048 || st != 1024 {
		t.Errorf("MemLimits = %d %d %v", j, st, err)
	}
	if u, err := c.UID(ctx); err != nil || u != uint32(os.Getuid()) {
		t.Errorf("UID = %d %v", u, err)
	}
	if n, err := c.NodeID(ctx); err != nil || n != 0 {
		t.Errorf("NodeID = %d %v", n, err)
	}
	if n, err := c.Stat(ctx); err != nil || n != 0 {
		t.Errorf("Stat = %d %v", n, err)
	}
	if d, x, err := c.X11Display(ctx); err != nil || d != 0 || x != "" {
		t.Errorf("X11Display = %d %q %v", d, x, err)
	}
	if err := c.AddExternPID(ctx, job.Process.Pid); err == nil {
		t.Error("batch step adopted an extern pid")
	}
	if err := c.Reconfigure(ctx); err != nil {
		t.Errorf("Reconfigure: %v", err)
	}
	err = c.StepCompletion(ctx, 1, 2, 0, []byte{0})
	if !errors.As(err, &se) || se.Errno != int32(syscall.ETIMEDOUT) {
		t.Errorf("StepCompletion: %v", err)
	}
	pw, err := c.GetPW(ctx, stepapi.GetPWMatchAlways, 0, "")
	if err != nil || pw == nil || *pw != (stepapi.Passwd{Name: "alice", Passwd: "x", UID: uint32(os.Getuid()), GID: 1500, Gecos: "Alice", Dir: "/home/alice", Shell: "/bin/bash"}) {
		t.Errorf("GetPW = %+v, %v", pw, err)
	}
	if pw, err := c.GetPW(ctx, stepapi.GetPWMatchPID, 0, ""); err != nil || pw != nil {
		t.Errorf("GetPW by pid from outside the job = %+v, %v", pw, err)
	}
	grs, err := c.GetGR(ctx, stepapi.GetPWMatchAlways, 0, "")
	if err != nil || len(grs) != 2 || grs[1] != (stepapi.Group{Name: "sudo", Passwd: "x", GID: 27, Member: "alice"}) {
		t.Errorf("GetGR = %+v, %v", grs, err)
	}
	if grs, err := c.GetGR(ctx, stepapi.GetPWMatchUserAndPID, 0, "sudo"); err != nil || len(grs) != 1 || grs[0].GID != 27 {
		t.Errorf("GetGR(sudo) = %+v, %v", grs, err)
	}
	if err := c.Notify(ctx, "hello-notify"); err != nil {
		t.Errorf("Notify: %v", err)
	}
	// Dummy signals print their line once and signal nothing.
	if err := c.SignalContainer(ctx, int(slurmproto.SigTimeLimit), 0, "over time", 0); err != nil {
		t.Errorf("SIG_TIME_LIMIT: %v", err)
	}
	if err := c.SignalContainer(ctx, int(slurmproto.SigPreempted), 0, "", 0); err != nil {
		t.Errorf("SIG_PREEMPTED: %v", err)
	}
	if err := c.Suspend(ctx, slurmproto.NoVal16); err != nil {
		t.Errorf("Suspend: %v", err)
	}
	waitState(t, job.Process.Pid, 'T')
	// The chain's record beside the socket: every stage done, suspended.
	if st, err := suspend.Load(stepapi.SuspendStatePath(s.sockPath)); err != nil || !st.Suspended || st.Running ||
		strings.Join(st.Done, ",") != StageTSTP+","+StageGrace+","+StageSTOP {
		t.Errorf("suspend state %+v, %v", st, err)
	}
	if err := c.Suspend(ctx, slurmproto.NoVal16); !errors.As(err, &se) || se.Errno != slurmproto.ESlurmdStepSuspended {
		t.Errorf("second Suspend: %v", err)
	}
	if err := c.SignalContainer(ctx, int(syscall.SIGUSR1), 0, "", 0); !errors.As(err, &se) || se.Errno != slurmproto.ESlurmdStepSuspended {
		t.Errorf("signal while suspended: %v", err)
	}
	if err := c.Resume(ctx, slurmproto.NoVal16); err != nil {
		t.Errorf("Resume: %v", err)
	}
	if err := c.Resume(ctx, slurmproto.NoVal16); !errors.As(err, &se) || se.Errno != slurmproto.ESlurmdStepNotSuspended {
		t.Errorf("second Resume: %v", err)
	}
	if st, err := suspend.Load(stepapi.SuspendStatePath(s.sockPath)); err != nil || st.Suspended || st.SuspendedFor <= 0 {
		t.Errorf("suspend state after resume %+v, %v", st, err)
	}
	if err := c.Terminate(ctx); err != nil {
		t.Errorf("Terminate: %v", err)
	}
	if _, err := os.Stat(stepapi.SuspendStatePath(s.sockPath)); !os.IsNotExist(err) {
		t.Errorf("suspend state left after terminate: %v", err)
	}
	err = job.Wait()
	if ws := job.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("job ended with %v", err)
	}
	errText := readFile(t, filepath.Join(s.spec.SpoolDir, "job.err"))
	lines := strings.Split(strings.TrimSpace(errText), "\n")
	if len(lines) != 3 || lines[0] != "slurmstepd-n9: error: hello-notify" ||
		!strings.HasPrefix(lines[1], "slurmstepd-n9: error: *** JOB 77 ON n9 CANCELLED AT ") ||
		!strings.HasSuffix(lines[1], " DUE TO TIME LIMIT ***") ||
		lines[2] != "slurmstepd-n9: error: *** REASON: over time ***" {
		t.Errorf("job stderr:\n%s", errText)
	}
	ts := strings.TrimSuffix(strings.TrimPrefix(lines[1], "slurmstepd-n9: error: *** JOB 77 ON n9 CANCELLED AT "), " DUE TO TIME LIMIT ***")
	if _, err := time.ParseInLocation("2006-01-02T15:04:05", ts, time.Local); err != nil {
		t.Errorf("cancel time %q: %v", ts, err)
	}
}

func waitState(t *testing.T, pid int, want byte) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not in state %c: %s", pid, want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ne writes native-endian ints for the raw layout test.
func ne(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch x := v.(type) {
		case int32:
			b = binary.NativeEndian.AppendUint32(b, uint32(x))
		case uint32:
			b = binary.NativeEndian.AppendUint32(b, x)
		case uint64:
			b = binary.NativeEndian.AppendUint64(b, x)
		case uint16:
			b = binary.NativeEndian.AppendUint16(b, x)
		case bool:
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case string:
			b = append(b, x...)
		}
	}
	return b
}

// TestServer_ByteLayout sends hand-built requests and compares the replies
// byte for byte with the C layouts of Slurm 22.05 stepd_api.c / req.c:
// native-endian C ints, enums 4 bytes, pid_t/uid_t 4, bool 1, no padding
// (fields are written one by one).
func TestServer_ByteLayout(t *testing.T) {
	s, job := serverStep(t)
	s.setState(stepapi.StateRunning)
	pid := int32(job.Process.Pid)
	c, err := net.Dial("unix", s.sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	exchange := func(name string, req []byte, want []byte) {
		t.Helper()
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: reply % x, want % x", name, got, want)
		}
	}
	exchange("handshake", ne(int32(0x2600)), ne(int32(0x2600)))
	exchange("state", ne(int32(5)), ne(int32(2)))
	exchange("daemon pid", ne(int32(9)), ne(int32(os.Getpid())))
	exchange("uid", ne(int32(20)), ne(uint32(os.Getuid())))
	exchange("mem limits", ne(int32(19)), ne(uint64(2048), uint64(1024)))
	exchange("pid in container", ne(int32(8), pid), ne(true))
	exchange("task info", ne(int32(14)), ne(uint32(1), int32(0), uint32(0), pid, false, int32(0)))
	exchange("list pids", ne(int32(15)), ne(uint32(1), uint32(pid)))
	exchange("notify", ne(int32(4022), int32(3), "hi\x00"), ne(int32(0)))
	exchange("signal SIGCONT", ne(int32(4), int32(syscall.SIGCONT), int32(0), int32(2), "ab", uint32(0)), ne(int32(0), int32(0)))
	exchange("add extern pid", ne(int32(22), pid), ne(int32(-1)))
	exchange("getpw always", ne(int32(24), int32(1), uint32(0), int32(0)),
		ne(int32(1), int32(5), "alice", int32(1), "x", uint32(os.Getuid()), uint32(1500),
			int32(5), "Alice", int32(11), "/home/alice", int32(9), "/bin/bash"))
	exchange("gethost", ne(int32(27), int32(0), int32(2), "n9"), ne(int32(0)))
	exchange("x11 display", ne(int32(23)), ne(int32(0), int32(0)))
	exchange("namespace fd", ne(int32(26)), ne(int32(0)))
	exchange("namespace fds (26.05)", ne(int32(28)), ne(int32(0)))
	exchange("terminate", ne(int32(12)), ne(int32(0), int32(0)))
	// An unknown request closes the connection.
	if _, err := c.Write(ne(int32(3))); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after unknown request: %d, %v", n, err)
	}

	// A client announcing a version below 20.11 gets -1.
	c2, err := net.Dial("unix", s.sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, _ = c2.Write(ne(int32(0x2300)))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c2, got); err != nil || !bytes.Equal(got, ne(int32(-1))) {
		t.Errorf("old version: % x %v", got, err)
	}
}

// TestServer_Authorization: another user may read state and pids but not
// signal, terminate or notify.
func TestServer_Authorization(t *testing.T) {
	s, _ := serverStep(t)
	s.setState(stepapi.StateRunning)
	s.uid = 4242 // the job belongs to someone else; we are not SlurmUser
	me := uint32(os.Getuid())
	if s.authorized(me) && me == 0 {
		// As root everything is allowed: check the decisions directly.
		if rc, errno := s.handleSignal(int(syscall.SIGUSR1), 0, "", 555, 555); rc != -1 || errno != int32(syscall.EPERM) {
			t.Errorf("signal from uid 555: %d %d", rc, errno)
		}
		if rc, errno := s.handleTerminate(555); rc != -1 || errno != int32(syscall.EPERM) {
			t.Errorf("terminate from uid 555: %d %d", rc, errno)
		}
		if rc, errno := s.handleSuspend(suspend.OpSuspend, 4242); rc != -1 || errno != int32(syscall.EPERM) {
			t.Errorf("suspend by the job owner: %d %d", rc, errno)
		}
		if rc, _ := s.handleSignal(int(syscall.SIGCONT), 0, "", 4242, 4242); rc != 0 {
			t.Errorf("signal by the job owner: %d", rc)
		}
		if rc, _ := s.handleSignal(int(syscall.SIGCONT), 0, "", 64030, 64030); rc != 0 {
			t.Errorf("signal by SlurmUser: %d", rc)
		}
		return
	}
	c, err := stepapi.Dial(context.Background(), s.sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var se *stepapi.StepError
	if err := c.Terminate(context.Background()); !errors.As(err, &se) || se.Errno != int32(syscall.EPERM) {
		t.Errorf("Terminate by a stranger: %v", err)
	}
}
