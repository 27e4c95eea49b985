//go:build linux

package stepd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/cgroup"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestMain lets the test binary act as slurmstepd-go (start, serve, task),
// so the end-to-end tests run the real step manager code, race detector
// included, without building another binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case stepapi.CmdServe, stepapi.CmdTask:
			os.Exit(Main(os.Args[1:]))
		case "launch-and-exit":
			os.Exit(launchAndExit())
		}
	}
	code := m.Run()
	removeTestCgroups()
	os.Exit(code)
}

// removeTestCgroups removes the test root (CgroupRoot "tiee-test/tn1") from
// every hierarchy once the step managers are gone.
func removeTestCgroups() {
	h, err := cgroup.Mounts("")
	if err != nil {
		return
	}
	mounts := []string{}
	if h.V2 != "" {
		mounts = append(mounts, h.V2)
	}
	for _, m := range h.V1 {
		mounts = append(mounts, m)
	}
	for _, m := range mounts {
		_ = syscall.Rmdir(filepath.Join(m, "tiee-test", "tn1"))
		_ = syscall.Rmdir(filepath.Join(m, "tiee-test"))
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the step manager runs jobs as other users: run as root (make test and CI do)")
	}
}

func selfBinary(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var nextJobID = uint32(time.Now().Unix()%100000)*10 + 100000

func jobID() uint32 { nextJobID++; return nextJobID }

// launch starts a step manager for o and registers its cleanup.
func launch(t *testing.T, ctld *fakeCtld, spool string, o jobOpts, edit func(*stepapi.StartSpec)) *stepapi.Handle {
	t.Helper()
	o.NodeName = "tn1"
	spec := testSpec(t, ctld.Addr(), spool, launchBody(t, o))
	if edit != nil {
		edit(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := stepapi.Launch(ctx, selfBinary(t), spec)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() {
		for end := time.Now().Add(10 * time.Second); proc.Alive(h.PID) && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		if proc.Alive(h.PID) {
			t.Logf("step manager %d still alive at cleanup: killing its job and it", h.PID)
			if c, err := stepapi.Dial(context.Background(), h.Socket); err == nil {
				_ = c.Terminate(context.Background())
				c.Close()
			}
			time.Sleep(200 * time.Millisecond)
			_ = syscall.Kill(h.PID, syscall.SIGKILL)
		}
	})
	return h
}

func waitGone(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %s", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitDead(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for proc.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %s", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestE2E_BatchJob runs a batch script that exits 3, as root and as an
// ordinary user: the output file has the default name, the user's
// ownership and the script's stdout and stderr; the fake slurmctld gets
// REQUEST_COMPLETE_BATCH_SCRIPT with job_rc 0x300; the socket, the
// script and its directory are gone afterwards.
func TestE2E_BatchJob(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	uid, gid, name, home := testUser(t)
	// As under nohup: ignored signals must not reach the job.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	defer signal.Reset(syscall.SIGHUP, syscall.SIGINT)
	for _, tc := range []struct {
		name     string
		uid, gid uint32
		user     string
		home     string
	}{
		{"root", 0, 0, "root", "/root"},
		{"user", uid, gid, name, home},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spool := t.TempDir()
			work := userDir(t, tc.uid, tc.gid)
			if err := os.Chown(work, int(tc.uid), int(tc.gid)); err != nil {
				t.Fatal(err)
			}
			id := jobID()
			h := launch(t, ctld, spool, jobOpts{
				JobID: id, UID: tc.uid, GID: tc.gid, UserName: tc.user, WorkDir: work, PwDir: tc.home,
				Script: "#!/bin/sh\necho out-$SLURM_JOB_ID\necho err-line >&2\nenv > env.txt\n" +
					"id -u > id.txt\numask > umask.txt\npwd > pwd.txt\ngrep SigIgn /proc/$$/status > sig.txt\n" +
					"id -G > groups.txt\nexit 3\n",
			}, nil)
			if want := stepapi.SocketPath(spool, "tn1", slurmproto.StepID{JobID: id, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal}); h.Socket != want {
				t.Errorf("socket %s, want %s", h.Socket, want)
			}
			c := ctld.waitComplete(t, id, 30*time.Second)
			if c.JobID != id || c.JobRC != 0x300 || c.SlurmRC != 0 || c.UserID != tc.uid || c.NodeName != "tn1" {
				t.Errorf("complete = %+v, want job %d rc 0x300 slurm_rc 0 uid %d node tn1", c, id, tc.uid)
			}
			waitGone(t, h.Socket, 10*time.Second)
			waitGone(t, stepapi.BatchDir(spool, id), 5*time.Second)
			waitDead(t, h.PID, 10*time.Second)

			out := filepath.Join(work, fmt.Sprintf("slurm-%d.out", id))
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(b), fmt.Sprintf("out-%d\nerr-line\n", id); got != want {
				t.Errorf("output %q, want %q", got, want)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(out, &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != tc.uid || st.Gid != tc.gid || st.Mode&0o777 != 0o644 {
				t.Errorf("output owner %d:%d mode %o, want %d:%d 644", st.Uid, st.Gid, st.Mode&0o777, tc.uid, tc.gid)
			}
			if got := strings.TrimSpace(readFile(t, filepath.Join(work, "id.txt"))); got != fmt.Sprint(tc.uid) {
				t.Errorf("script ran as uid %s", got)
			}
			if got := strings.TrimSpace(readFile(t, filepath.Join(work, "sig.txt"))); got != "SigIgn:\t0000000000000000" {
				t.Errorf("job starts with ignored signals: %q", got)
			}
			if got := strings.TrimSpace(readFile(t, filepath.Join(work, "groups.txt"))); got != fmt.Sprint(tc.gid) {
				t.Errorf("groups %q, want the credential's %d", got, tc.gid)
			}
			if got := strings.TrimSpace(readFile(t, filepath.Join(work, "umask.txt"))); got != "0022" {
				t.Errorf("umask %s", got)
			}
			if got := strings.TrimSpace(readFile(t, filepath.Join(work, "pwd.txt"))); got != work {
				t.Errorf("cwd %s", got)
			}
			env := readEnvFile(t, filepath.Join(work, "env.txt"))
			for k, v := range map[string]string{
				"SLURM_JOB_ID": fmt.Sprint(id), "SLURM_JOBID": fmt.Sprint(id), "ENVIRONMENT": "BATCH",
				"HOSTNAME": "tn1", "SLURMD_NODENAME": "tn1", "SLURM_JOB_USER": tc.user,
				"SLURM_JOB_UID": fmt.Sprint(tc.uid), "SLURM_JOB_GID": fmt.Sprint(tc.gid),
				"SLURM_NODE_ALIASES": "(null)", "SLURM_TOPOLOGY_ADDR": "tn1", "TMPDIR": "/tmp",
				"SLURM_GTIDS": "0", "SLURM_PROCID": "0", "SLURM_MEM_PER_CPU": "100",
				"SLURM_WORKING_CLUSTER": "tc:127.0.0.1:6817:9728:109", "SLURM_CONF": "/etc/slurm/slurm.conf",
			} {
				if env[k] != v {
					t.Errorf("%s=%q, want %q", k, env[k], v)
				}
			}
			if _, ok := env["SLURM_UMASK"]; ok {
				t.Error("SLURM_UMASK left in a batch job's environment")
			}
			if env["SLURM_TASK_PID"] == "" {
				t.Error("no SLURM_TASK_PID")
			}
		})
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// launchAndExit is the helper process of TestE2E_SurvivesLauncher: it
// launches a step manager from the spec file named in its environment,
// prints the socket path and exits.
func launchAndExit() int {
	b, err := os.ReadFile(os.Getenv("TIEE_TEST_SPEC"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	spec, err := stepapi.ReadSpec(strings.NewReader(string(b)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, _ := os.Executable()
	h, err := stepapi.Launch(context.Background(), self, *spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %d\n", h.Socket, h.PID)
	return 0
}

// TestE2E_SurvivesLauncher launches from a helper process that exits at
// once: the step manager keeps running (re-parented, own session) and its
// socket keeps answering; a terminate through the socket then kills a
// job that ignores SIGTERM, after KillWait.
func TestE2E_SurvivesLauncher(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	spool := t.TempDir()
	work := t.TempDir()
	id := jobID()
	spec := testSpec(t, ctld.Addr(), spool, launchBody(t, jobOpts{
		JobID: id, UID: 0, GID: 0, UserName: "root", WorkDir: work, NodeName: "tn1", PwDir: "/root",
		Script: "#!/bin/sh\ntrap '' TERM\nsleep 1000 &\necho $! > child.pid\nwait\nwait\necho never\n",
	}))
	specFile := filepath.Join(t.TempDir(), "spec")
	f, _ := os.Create(specFile)
	if err := stepapi.WriteSpec(f, &spec); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cmd := exec.Command(selfBinary(t), "launch-and-exit")
	cmd.Env = append(os.Environ(), "TIEE_TEST_SPEC="+specFile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("launcher: %v", err)
	}
	var sock string
	var pid int
	if _, err := fmt.Sscan(string(out), &sock, &pid); err != nil {
		t.Fatalf("launcher said %q", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	// The launcher has exited; the step manager was re-parented.
	st, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatalf("step manager %d gone with its launcher: %v", pid, err)
	}
	if st.PPID == os.Getpid() || st.SID != pid {
		t.Errorf("step manager ppid %d sid %d: want re-parented and its own session", st.PPID, st.SID)
	}

	ctx := context.Background()
	c, err := stepapi.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := c.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s == stepapi.StateRunning && fileExists(filepath.Join(work, "child.pid")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var child int
	fmt.Sscan(readFile(t, filepath.Join(work, "child.pid")), &child)
	for _, l := range strings.Split(readFile(t, fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			t.Logf("idle step manager %s (test binary as step manager)", l)
		}
	}
	if ok, err := c.PidInContainer(ctx, child); err != nil || !ok {
		t.Fatalf("PidInContainer(%d) = %v, %v", child, ok, err)
	}
	// SIGTERM alone leaves everything running.
	if err := c.SignalContainer(ctx, int(syscall.SIGTERM), 0, "", 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if !proc.Alive(child) {
		t.Fatal("child ignoring SIGTERM died of SIGTERM")
	}
	// SIG_TERM_KILL: SIGCONT, SIGTERM, KillWait (1 s), SIGKILL.
	start := time.Now()
	if err := c.SignalContainer(ctx, int(slurmproto.SigTermKill), 0, "", 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < spec.KillWait {
		t.Errorf("SIG_TERM_KILL returned after %s, before KillWait", d)
	}
	waitDead(t, child, 5*time.Second)
	done := ctld.waitComplete(t, id, 30*time.Second)
	if ws := syscall.WaitStatus(done.JobRC); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("job_rc %#x, want killed by SIGKILL", done.JobRC)
	}
	waitGone(t, sock, 10*time.Second)
	waitDead(t, pid, 10*time.Second)
	outText := readFile(t, filepath.Join(work, fmt.Sprintf("slurm-%d.out", id)))
	if !strings.Contains(outText, fmt.Sprintf("slurmstepd-tn1: error: *** JOB %d ON tn1 CANCELLED AT ", id)) {
		t.Errorf("no cancel line in output: %q", outText)
	}
	if strings.Count(outText, "CANCELLED") != 1 {
		t.Errorf("cancel line not exactly once: %q", outText)
	}
}

// userDir is a temporary directory the user owns and can reach.
func userDir(t *testing.T, uid, gid uint32) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return d
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestE2E_LaunchErrors: setup failures come back from Launch as a
// *LaunchError with stock's rc, and leave nothing behind.
func TestE2E_LaunchErrors(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	for _, tc := range []struct {
		name string
		opts jobOpts
		edit func(*stepapi.StartSpec)
		rc   uint32
	}{
		{"empty script", jobOpts{Script: slurmproto.EmptyString}, nil, slurmproto.ESlurmdCreateBatchDirError},
		{"spool dir missing", jobOpts{Script: "#!/bin/sh\n"}, func(s *stepapi.StartSpec) { s.SpoolDir = "/nonexistent/spool" }, slurmproto.ESlurmdCreateBatchDirError},
		{"garbage launch body", jobOpts{Script: "#!/bin/sh\n"}, func(s *stepapi.StartSpec) { s.LaunchBody = []byte{1, 2, 3} }, slurmproto.ESlurmdSetupEnvironmentError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spool := t.TempDir()
			o := tc.opts
			o.JobID, o.WorkDir, o.UserName, o.NodeName = jobID(), t.TempDir(), "root", "tn1"
			spec := testSpec(t, ctld.Addr(), spool, launchBody(t, o))
			if tc.edit != nil {
				tc.edit(&spec)
			}
			_, err := stepapi.Launch(context.Background(), selfBinary(t), spec)
			var le *stepapi.LaunchError
			if !errors.As(err, &le) || le.RC != tc.rc {
				t.Fatalf("Launch = %v, want rc %s", err, slurmproto.RCName(tc.rc))
			}
			if stepapi.RC(err) != tc.rc {
				t.Errorf("RC(err) = %d", stepapi.RC(err))
			}
			if ents, _ := os.ReadDir(spool); len(ents) > 0 && spec.SpoolDir == spool {
				for _, e := range ents {
					if e.Name() != "stepd.log" {
						t.Errorf("left in spool: %s", e.Name())
					}
				}
			}
		})
	}
}

// TestE2E_NoAckNoJob: a step manager whose launcher never acknowledges
// undoes its setup and never runs the script.
func TestE2E_NoAckNoJob(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	spool, work := t.TempDir(), t.TempDir()
	id := jobID()
	spec := testSpec(t, ctld.Addr(), spool, launchBody(t, jobOpts{JobID: id, UserName: "root", WorkDir: work,
		NodeName: "tn1", Script: "#!/bin/sh\ntouch ran\n"}))
	specR, specW, _ := os.Pipe()
	repR, repW, _ := os.Pipe()
	cmd := exec.Command(selfBinary(t), stepapi.CmdServe)
	cmd.ExtraFiles = []*os.File{specR, repW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	specR.Close()
	repW.Close()
	go func() { _ = stepapi.WriteSpec(specW, &spec) }()
	rep, err := stepapi.ReadReport(repR)
	if err != nil || rep.RC != 0 {
		t.Fatalf("report %+v %v", rep, err)
	}
	specW.Close() // no ack
	_ = cmd.Wait()
	waitDead(t, rep.PID, 10*time.Second)
	if fileExists(rep.Socket) || fileExists(stepapi.BatchDir(spool, id)) {
		t.Error("socket or batch dir left behind")
	}
	if fileExists(filepath.Join(work, "ran")) {
		t.Error("the job ran without an ack")
	}
}

// TestE2E_StdioAsUser: the user's files are opened with the user's
// rights: a file the user may not create makes the launch an I/O error
// (job_rc ESLURMD_IO_ERROR, as stock) and no root-owned file appears.
func TestE2E_StdioAsUser(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	uid, gid, name, home := testUser(t)
	rootDir := userDir(t, 0, 0) // 0755, root's
	work := userDir(t, uid, gid)
	for _, tc := range []struct {
		name, out string
	}{
		{"directory not writable", filepath.Join(rootDir, "out-%j")},
		{"no such directory", "nodir/out-%j"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := jobID()
			launch(t, ctld, t.TempDir(), jobOpts{JobID: id, UID: uid, GID: gid, UserName: name, PwDir: home,
				WorkDir: work, StdOut: tc.out, Script: "#!/bin/sh\ntouch ran\n"}, nil)
			c := ctld.waitComplete(t, id, 30*time.Second)
			if c.JobRC != slurmproto.ESlurmdIOError || c.SlurmRC != 0 {
				t.Errorf("complete %+v, want job_rc ESLURMD_IO_ERROR and slurm_rc 0", c)
			}
			if ents, _ := os.ReadDir(rootDir); len(ents) != 0 {
				t.Errorf("files appeared in root's directory: %v", ents)
			}
			if fileExists(filepath.Join(work, "ran")) {
				t.Error("job ran without its output file")
			}
		})
	}
}

// TestE2E_PatternsAppendArray: an array task with a pattern for stdout and
// stderr in append mode, a missing working directory, and a time limit.
func TestE2E_PatternsAppendArray(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	uid, gid, name, home := testUser(t)
	work := userDir(t, uid, gid)
	outDir := userDir(t, uid, gid)
	host, _ := os.Hostname()
	id := jobID()
	outName := filepath.Join(outDir, fmt.Sprintf("o-900_4-testjob-%s-%s.txt", name, host))
	if err := os.WriteFile(outName, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(outName, int(uid), int(gid))
	h := launch(t, ctld, t.TempDir(), jobOpts{JobID: id, UID: uid, GID: gid, UserName: name, PwDir: home,
		WorkDir: filepath.Join(work, "missing"), ArrayJobID: 900, ArrayTaskID: 4,
		StdOut: filepath.Join(outDir, "o-%A_%a-%x-%u-%N.txt"), StdErr: filepath.Join(outDir, "e-%5j.txt"),
		OpenMode: slurmproto.OpenModeAppend,
		Script:   "#!/bin/sh\necho new\npwd\necho $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID\nsleep 1000\n"}, nil)
	ctx := context.Background()
	c, err := stepapi.Dial(ctx, h.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readFile(t, outName), "900 4") {
		if time.Now().After(deadline) {
			t.Fatalf("output so far: %q", readFile(t, outName))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// What slurmd does on a time limit: the dummy signal, then SIG_TERM_KILL.
	if err := c.SignalContainer(ctx, int(slurmproto.SigTimeLimit), 0, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.SignalContainer(ctx, int(slurmproto.SigTermKill), 0, "", 0); err != nil {
		t.Fatal(err)
	}
	done := ctld.waitComplete(t, id, 30*time.Second)
	if ws := syscall.WaitStatus(done.JobRC); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("job_rc %#x, want SIGTERM", done.JobRC)
	}
	if got, want := readFile(t, outName), "old\nnew\n/tmp\n900 4\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	errText := readFile(t, filepath.Join(outDir, fmt.Sprintf("e-%05d.txt", id)))
	lines := strings.Split(strings.TrimSpace(errText), "\n")
	chdir := fmt.Sprintf("slurmstepd-tn1: error: couldn't chdir to `%s': No such file or directory: going to /tmp instead", filepath.Join(work, "missing"))
	if len(lines) != 3 || lines[0] != chdir || lines[1] != chdir ||
		!strings.HasPrefix(lines[2], fmt.Sprintf("slurmstepd-tn1: error: *** JOB %d ON tn1 CANCELLED AT ", id)) ||
		!strings.HasSuffix(lines[2], " DUE TO TIME LIMIT ***") {
		t.Errorf("stderr:\n%s", errText)
	}
}

// TestE2E_MemoryLimit: the credential's job memory limit is enforced with
// the cgroup hierarchy this host offers; a job exceeding it is OOM-killed
// and reported with job_rc SIG_OOM and stock's line in its stderr. Where
// no memory controller exists the job runs unconfined.
func TestE2E_MemoryLimit(t *testing.T) {
	requireRoot(t)
	m, err := cgroup.New(cgroup.Options{Root: "tiee-test/tn1"})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := m.Create(1, "probe")
	if err != nil {
		t.Fatal(err)
	}
	memErr := probe.SetMemoryLimit(1 << 30)
	_ = probe.Remove()
	t.Logf("cgroup %s, memory limit: %v", m.Kind(), memErr)

	ctld := newFakeCtld(t, realMunge(t))
	work := t.TempDir()
	id := jobID()
	h := launch(t, ctld, t.TempDir(), jobOpts{JobID: id, UserName: "root", WorkDir: work, MemMiB: 48,
		Script: "#!/bin/sh\ncat /proc/self/cgroup > cg.txt\nhead -c 1G /dev/zero | tail\necho survived\n"}, nil)
	c := ctld.waitComplete(t, id, 60*time.Second)
	out := readFile(t, filepath.Join(work, fmt.Sprintf("slurm-%d.out", id)))
	cg := readFile(t, filepath.Join(work, "cg.txt"))
	if m.Kind() != cgroup.KindNone && !strings.Contains(cg, fmt.Sprintf("/tiee-test/tn1/job_%d/step_batch", id)) {
		t.Errorf("job not in its step cgroup:\n%s", cg)
	}
	if memErr != nil {
		if c.JobRC != 0 {
			t.Errorf("unconfined job_rc %#x", c.JobRC)
		}
		return
	}
	if c.JobRC != uint32(slurmproto.SigOOM) {
		t.Errorf("job_rc %#x, want SIG_OOM", c.JobRC)
	}
	if !strings.Contains(out, fmt.Sprintf("slurmstepd-tn1: error: Detected 1 oom-kill event(s) in StepId=%d.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.", id)) {
		t.Errorf("output:\n%s", out)
	}
	waitGone(t, h.Socket, 10*time.Second)
}

// TestE2E_TaskPrologEpilog: TaskProlog runs as the user before the script;
// its "export", "unset" and "print" lines change the job's environment
// and stdout; TaskEpilog runs as the user after it, with
// SLURM_SCRIPT_CONTEXT=epilog_task, its stderr in the job's.
func TestE2E_TaskPrologEpilog(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	uid, gid, name, home := testUser(t)
	work := userDir(t, uid, gid)
	scripts := userDir(t, 0, 0)
	prolog := filepath.Join(scripts, "task_prolog")
	epilog := filepath.Join(scripts, "task_epilog")
	_ = os.WriteFile(prolog, []byte("#!/bin/sh\necho export FROM_PROLOG=yes-$(id -u)\necho unset SLURM_JOB_NAME\n"+
		"echo print hello from prolog\necho \"export CTX=$SLURM_SCRIPT_CONTEXT\"\n"), 0o755)
	_ = os.WriteFile(epilog, []byte("#!/bin/sh\necho epilog $(id -u) $SLURM_SCRIPT_CONTEXT $SLURMD_NODENAME >&2\n"+
		"echo epilog-stdout-is-discarded\n"), 0o755)
	id := jobID()
	launch(t, ctld, t.TempDir(), jobOpts{JobID: id, UID: uid, GID: gid, UserName: name, PwDir: home, WorkDir: work,
		Script: "#!/bin/sh\necho script $FROM_PROLOG ${SLURM_JOB_NAME:-unset} $CTX\n"},
		func(s *stepapi.StartSpec) { s.TaskProlog, s.TaskEpilog = prolog, epilog })
	if c := ctld.waitComplete(t, id, 30*time.Second); c.JobRC != 0 {
		t.Errorf("job_rc %#x", c.JobRC)
	}
	out := filepath.Join(work, fmt.Sprintf("slurm-%d.out", id))
	want := fmt.Sprintf("hello from prolog\nscript yes-%d unset prolog_task\nepilog %d epilog_task tn1\n", uid, uid)
	deadline := time.Now().Add(10 * time.Second)
	for readFile(t, out) != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := readFile(t, out); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// TestE2E_Descriptors: a batch script and its TaskProlog and TaskEpilog
// hold fds 0-2 only, as stock's do, although the process that launched the
// step manager holds descriptors without close-on-exec (as a daemon
// started from a shell inherits them): one low, one at 250.
func TestE2E_Descriptors(t *testing.T) {
	requireRoot(t)
	ctld := newFakeCtld(t, realMunge(t))
	uid, gid, name, home := testUser(t)
	work := userDir(t, uid, gid)
	scripts := userDir(t, 0, 0)
	for _, target := range []int{-1, 250} {
		fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0) // no O_CLOEXEC
		if err != nil {
			t.Fatal(err)
		}
		if target > 0 {
			if err := syscall.Dup2(fd, target); err != nil {
				t.Fatal(err)
			}
			syscall.Close(fd)
			fd = target
		}
		t.Cleanup(func() { syscall.Close(fd) })
	}
	// ls's own directory descriptor is the 3 of each listing.
	list := func(who string) string {
		return "echo " + who + " $(ls /proc/self/fd)\n"
	}
	prolog := filepath.Join(scripts, "task_prolog")
	epilog := filepath.Join(scripts, "task_epilog")
	_ = os.WriteFile(prolog, []byte("#!/bin/sh\necho print $(ls /proc/self/fd)\n"), 0o755)
	_ = os.WriteFile(epilog, []byte("#!/bin/sh\n"+strings.TrimSuffix(list("epilog"), "\n")+" >&2\n"), 0o755)
	id := jobID()
	launch(t, ctld, t.TempDir(), jobOpts{JobID: id, UID: uid, GID: gid, UserName: name, PwDir: home, WorkDir: work,
		Script: "#!/bin/sh\n" + list("script")},
		func(s *stepapi.StartSpec) { s.TaskProlog, s.TaskEpilog = prolog, epilog })
	if c := ctld.waitComplete(t, id, 30*time.Second); c.JobRC != 0 {
		t.Errorf("job_rc %#x", c.JobRC)
	}
	out := filepath.Join(work, fmt.Sprintf("slurm-%d.out", id))
	// The prolog's own listing runs in a command substitution: its stdout
	// is the substitution's pipe, still fd 1.
	want := "0 1 2 3\nscript 0 1 2 3\nepilog 0 1 2 3\n"
	deadline := time.Now().Add(10 * time.Second)
	for readFile(t, out) != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := readFile(t, out); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
