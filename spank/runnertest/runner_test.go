// Package runnertest exercises bin/spank-runner by playing the step
// manager's side of spank/runner/PROTOCOL.md.
package runnertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	nobodyUID = 65534
	nobodyGID = 65534
)

type env struct {
	dir, runner, helper string
	so                  map[string]string // name -> .so
}

func repoRoot(t *testing.T) string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("%s %v: unexpected output (warnings?):\n%s", name, args, out)
	}
}

func setup(t *testing.T) *env {
	if os.Geteuid() != 0 {
		// The runner drops to a user and back, as slurmstepd: CI runs as root.
		t.Fatalf("spank-runner tests need root (they change credentials), euid %d", os.Geteuid())
	}
	root := repoRoot(t)
	dir, err := os.MkdirTemp("", "spankrunner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// the tasks run as nobody and write their traces here
	os.Chmod(dir, 0o777)
	e := &env{dir: dir, so: map[string]string{}}
	e.runner = os.Getenv("TIEE_SPANK_RUNNER")
	if e.runner == "" {
		e.runner = filepath.Join(dir, "spank-runner")
		srcs, _ := filepath.Glob(filepath.Join(root, "spank/runner/*.c"))
		args := append([]string{"-O2", "-g", "-Wall", "-Wextra", "-std=gnu11", "-rdynamic", "-o", e.runner}, srcs...)
		run(t, "gcc", append(args, "-ldl")...)
	}
	e.helper = filepath.Join(dir, "helper")
	run(t, "gcc", "-Wall", "-o", e.helper, filepath.Join(root, "spank/runnertest/testdata/helper.c"))
	build := func(name, ver string) {
		out := filepath.Join(dir, name+".so")
		// -z now as pyxis: every import must resolve against the runner
		args := []string{"-shared", "-fPIC", "-Wall", "-Wl,-z,now", "-o", out, "-DPNAME=\"" + name + "\""}
		if ver != "" {
			args = append(args, "-DPVER="+ver)
		}
		run(t, "gcc", append(args, filepath.Join(root, "spank/runnertest/testdata/tplug.c"))...)
		e.so[name] = out
	}
	defer e.mkTrace(t)
	build("tplug", "")
	build("oplug", "")
	build("oldplug", "0x150802") // 21.08: must be refused
	return e
}

func (e *env) trace() string { return filepath.Join(e.dir, "trace") }

// mkTrace creates the trace file writable by the user hooks.
func (e *env) mkTrace(t *testing.T) {
	if err := os.WriteFile(e.trace(), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(e.trace(), 0o666)
}

func (e *env) writeConf(t *testing.T, lines ...string) string {
	p := filepath.Join(e.dir, "plugstack.conf")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type runner struct {
	t       *testing.T
	cmd     *exec.Cmd
	fd      int
	log     *syncBuf
	done    chan error
	pending []msg // received, not yet expected
}

// syncBuf is the runner's log: its stderr (copied by exec) and its LOG packets.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (e *env) start(t *testing.T) *runner {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	child := os.NewFile(uintptr(fds[1]), "sock")
	r := &runner{t: t, fd: fds[0], log: &syncBuf{}, done: make(chan error, 1)}
	r.cmd = exec.Command(e.runner)
	r.cmd.ExtraFiles = []*os.File{child}
	r.cmd.Stdout = r.log
	r.cmd.Stderr = r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		unix.Close(r.fd)
		r.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("runner log:\n%s", r.log.String())
		}
	})
	return r
}

func (r *runner) send(fields []string, fds ...int) {
	r.t.Helper()
	b := []byte(strings.Join(fields, "\x00") + "\x00")
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(r.fd, b, oob, nil, 0); err != nil {
		r.t.Fatalf("send %s: %v", fields[0], err)
	}
}

type msg struct {
	cmd string
	kv  map[string][]string
}

func (m msg) get(k string) string {
	if v := m.kv[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// recv returns the next packet; LOG packets go to the log.
func (r *runner) recv() msg {
	r.t.Helper()
	for {
		m := r.recv1()
		if m.cmd != "LOG" {
			return m
		}
		fmt.Fprintf(r.log, "spank-runner: %s: %s\n", m.get("level"), m.get("text"))
	}
}

func (r *runner) recv1() msg {
	r.t.Helper()
	buf := make([]byte, 4<<20)
	tv := unix.Timeval{Sec: 20}
	unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	n, _, _, _, err := unix.Recvmsg(r.fd, buf, nil, 0)
	if err != nil || n == 0 {
		r.t.Fatalf("recv: n=%d err=%v\nlog:\n%s", n, err, r.log.String())
	}
	parts := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
	m := msg{cmd: parts[0], kv: map[string][]string{}}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		m.kv[k] = append(m.kv[k], v)
	}
	return m
}

// expect returns the next packet cmd; EXIT packets come unasked, so those
// met on the way are kept for a later expect("EXIT").
func (r *runner) expect(cmd string) msg {
	r.t.Helper()
	for i, m := range r.pending {
		if m.cmd == cmd {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			return m
		}
	}
	for {
		m := r.recv()
		if m.cmd == cmd {
			return m
		}
		if m.cmd != "EXIT" {
			r.t.Fatalf("got %s %v, want %s\nlog:\n%s", m.cmd, m.kv, cmd, r.log.String())
		}
		r.pending = append(r.pending, m)
	}
}

// ready is init through user_init: READY, USER, READY (the second has the
// step env's whole delta).
func (r *runner) ready() msg {
	r.t.Helper()
	r.expect("READY")
	r.send([]string{"USER"})
	return r.expect("READY")
}

// goTask is GO i and its POSTFORK answer.
func (r *runner) goTask(i int) {
	r.t.Helper()
	r.send([]string{"GO", fmt.Sprintf("i=%d", i)})
	r.expect("POSTFORK")
}

// reaped is REAPED i and its TASKEXIT answer.
func (r *runner) reaped(i int) {
	r.t.Helper()
	r.send([]string{"REAPED", fmt.Sprintf("i=%d", i)})
	r.expect("TASKEXIT")
}

func (r *runner) wait(wantCode int) {
	r.t.Helper()
	select {
	case err := <-r.done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			r.t.Fatal(err)
		}
		if code != wantCode {
			r.t.Fatalf("runner exit %d, want %d\nlog:\n%s", code, wantCode, r.log.String())
		}
	case <-time.After(20 * time.Second):
		r.t.Fatal("runner did not exit")
	}
}

func (e *env) stepFields(conf string, extra ...string) []string {
	f := []string{"STEP", "mode=tasks", "plugstack=" + conf, "plugindir=" + e.dir,
		fmt.Sprintf("version_number=%d", 0x160508), "slurm_version=22.05.8",
		"helper=" + e.helper, fmt.Sprintf("uid=%d", nobodyUID), fmt.Sprintf("gid=%d", nobodyGID),
		"user=nobody", fmt.Sprintf("sgid=%d", nobodyGID), "cwd=" + e.dir, "node=n1",
		"jobid=4242", "stepid=3", "nnodes=1", "nodeid=0", "local_tasks=2", "total_tasks=4",
		"ncpus=2", "cpus_per_task=1", "task=2", "task=3", "argv=/bin/true", "argv=x",
		"env=STEPVAR=stepval", "env=STEPDROP=1", "env=SLURM_JOB_ID=4242",
		"env=_SLURM_SPANK_OPTION_tplug_opt_c=CCC", "env=_SLURM_SPANK_OPTION_tplug_opt_a=AENV",
		"env=_SLURM_SPANK_OPTION_nosuch_x=1",
		"jobopt=opt-a:tplug=AAA", "jobopt=opt-b:tplug=BBB"}
	return append(f, extra...)
}

type taskIO struct {
	report string
	stderr string // the task's stderr file
	cfgW   *os.File
}

// startTask sends TASK i with stdio, a config pipe carrying cfg and fd 4 = report file.
func (e *env) startTask(t *testing.T, r *runner, i int, cfg string, env ...string) (taskIO, int) {
	t.Helper()
	devnull, _ := os.OpenFile("/dev/null", os.O_RDWR, 0)
	defer devnull.Close()
	pr, pw, _ := os.Pipe()
	defer pr.Close()
	rep := filepath.Join(e.dir, fmt.Sprintf("report%d", i))
	rf, err := os.OpenFile(rep, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	errPath := filepath.Join(e.dir, fmt.Sprintf("stderr%d", i))
	ef, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	fields := append([]string{"TASK", fmt.Sprintf("i=%d", i), "pgid=0", "setsid=0",
		"env=STEPVAR=stepval", "env=TASKDROP=x", fmt.Sprintf("env=SLURM_PROCID=%d", i+2)}, env...)
	r.send(fields, int(devnull.Fd()), int(devnull.Fd()), int(ef.Fd()), int(pr.Fd()), int(rf.Fd()))
	pw.WriteString(cfg)
	pw.Close()
	m := r.expect("PID")
	if m.get("i") != strconv.Itoa(i) {
		t.Fatalf("PID for %v, want %d", m.kv, i)
	}
	pid, _ := strconv.Atoi(m.get("pid"))
	return taskIO{report: rep, stderr: errPath}, pid
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hooks returns the "hook=" trace lines of plugin name in order, as maps.
func hooks(trace, name string) []map[string]string {
	var out []map[string]string
	for _, l := range strings.Split(trace, "\n") {
		if !strings.HasPrefix(l, name+" hook=") {
			continue
		}
		m := map[string]string{}
		for _, f := range strings.Fields(l)[1:] {
			k, v, _ := strings.Cut(f, "=")
			m[k] = v
		}
		out = append(out, m)
	}
	return out
}

func TestTwoTaskStep(t *testing.T) {
	e := setup(t)
	conf := e.writeConf(t,
		"# comment line",
		"",
		"required tplug.so trace="+e.trace()+"   # relative: found in plugindir",
		"optional "+e.so["oplug"]+" trace="+e.trace()+" fail=init",
		"bogus line here",
	)
	r := e.start(t)
	r.send(e.stepFields(conf))
	ready := r.ready()
	set := strings.Join(ready.kv["set"], "|")
	unset := strings.Join(ready.kv["unset"], "|")
	// both plugins set it with overwrite=1: the later one wins
	if !strings.Contains("|"+set+"|", "|TPLUG_USER=u-oplug|") {
		t.Errorf("READY set=%q lacks TPLUG_USER=u-oplug", set)
	}
	for _, u := range []string{"STEPDROP", "_SLURM_SPANK_OPTION_tplug_opt_c", "_SLURM_SPANK_OPTION_tplug_opt_a", "_SLURM_SPANK_OPTION_nosuch_x"} {
		if !strings.Contains("|"+unset+"|", "|"+u+"|") {
			t.Errorf("READY unset=%q lacks %s", unset, u)
		}
	}
	if strings.Contains(set, "STEPVAR=nope") {
		t.Errorf("overwrite=0 replaced STEPVAR: %q", set)
	}

	var pids [2]int
	var tio [2]taskIO
	tio[0], pids[0] = e.startTask(t, r, 0, "0")
	tio[1], pids[1] = e.startTask(t, r, 1, "7")
	// tasks wait at the gate: no exec before GO
	time.Sleep(100 * time.Millisecond)
	if b, _ := os.ReadFile(tio[0].report); len(b) != 0 {
		t.Fatalf("task 0 ran before GO: %s", b)
	}
	r.goTask(0)
	r.goTask(1)
	status := map[string]string{}
	for len(status) < 2 {
		m := r.expect("EXIT")
		status[m.get("i")] = m.get("status")
		if m.get("utime_us") == "" || m.get("maxrss_kb") == "" {
			t.Errorf("EXIT lacks rusage: %v", m.kv)
		}
	}
	if status["0"] != "0" || status["1"] != strconv.Itoa(7<<8) {
		t.Errorf("EXIT statuses %v, want 0 and %d", status, 7<<8)
	}
	r.reaped(0)
	r.reaped(1)
	r.send([]string{"FINI"})
	if m := r.expect("DONE"); m.get("rc") != "0" {
		t.Errorf("DONE %v", m.kv)
	}
	r.wait(0)

	tr := readFile(t, e.trace())
	t.Logf("trace:\n%s", tr)
	hs := hooks(tr, "tplug")
	// parent: init, init_post_opt, user_init, then per task post_fork; exits; exit.
	var parentOrder, childOrder []string
	for _, h := range hs {
		pid, _ := strconv.Atoi(h["pid"])
		if pid == pids[0] || pid == pids[1] {
			childOrder = append(childOrder, h["hook"]+"/"+h["taskid"])
		} else {
			parentOrder = append(parentOrder, h["hook"])
		}
		// credentials
		want := map[string][2]string{
			"init": {"0", "0"}, "init_post_opt": {"0", "0"}, "user_init": {"65534", "0"},
			"task_init_privileged": {"0", "0"}, "task_init": {"65534", "65534"},
			"task_post_fork": {"0", "0"}, "task_exit": {"0", "0"}, "exit": {"0", "0"},
		}[h["hook"]]
		if h["euid"] != want[0] || h["ruid"] != want[1] {
			t.Errorf("%s: euid=%s ruid=%s, want %v", h["hook"], h["euid"], h["ruid"], want)
		}
		if h["jobid"] != "4242" || h["stepid"] != "3" || h["ctx"] != "2" || h["remote"] != "1" || h["ntasks"] != "2" {
			t.Errorf("%s: items %v", h["hook"], h)
		}
		switch h["hook"] {
		case "init", "init_post_opt", "user_init", "exit":
			if h["taskid"] != "-1" || h["taskid_rc"] != "3002" {
				t.Errorf("%s: task items outside a task: %v", h["hook"], h)
			}
		default:
			tid, _ := strconv.Atoi(h["taskid"])
			// In the task's own process S_TASK_PID is still -1, as in a
			// stock slurmstepd's forked child; the parent knows the pid.
			wantPID := strconv.Itoa(pids[max(0, min(tid, 1))])
			if h["hook"] == "task_init_privileged" || h["hook"] == "task_init" {
				wantPID = "-1"
			}
			if tid < 0 || tid > 1 || h["gtid"] != strconv.Itoa(tid+2) || h["tpid"] != wantPID {
				t.Errorf("%s: task items %v (pids %v)", h["hook"], h, pids)
			}
		}
	}
	gotParent := strings.Join(parentOrder, ",")
	if !strings.HasPrefix(gotParent, "init,init_post_opt,user_init,task_post_fork,task_post_fork,") ||
		!strings.HasSuffix(gotParent, "task_exit,task_exit,exit") {
		t.Errorf("parent hook order %s", gotParent)
	}
	for i := 0; i < 2; i++ {
		want := fmt.Sprintf("task_init_privileged/%d,task_init/%d", i, i)
		var got []string
		for _, c := range childOrder {
			if strings.HasSuffix(c, "/"+strconv.Itoa(i)) {
				got = append(got, c)
			}
		}
		if strings.Join(got, ",") != want {
			t.Errorf("task %d child hooks %v, want %s", i, got, want)
		}
	}
	// options: jobopt a, b; env c and a (a fires twice), all remote=1
	for _, want := range []string{
		"tplug register rc=0 getopt_init=3009",
		"tplug version=22.05.8",
		"tplug opt val=1 arg=AAA remote=1",
		"tplug opt val=2 arg=BBB remote=1",
		"tplug opt val=3 arg=CCC remote=1",
		"tplug opt val=1 arg=AENV remote=1",
		"tplug register_post rc=3001",
		"tplug getopt a=0:AENV b=0:BBB c=0:CCC",
		"tplug setenv_user rc=0 exists_rc=3003 getenv_rc=0",
		"tplug getenv STEPVAR=stepval nospace=3005 noexist=3004",
		"tplug jc rc=3010",
		"tplug pid2global rc=0 g=2",
		"tplug pid2global rc=0 g=3",
		fmt.Sprintf("tplug exitstatus task=1 rc=0 status=%d", 7<<8),
		"tplug exitstatus task=0 rc=0 status=0",
	} {
		if !strings.Contains(tr, want+"\n") {
			t.Errorf("trace lacks %q", want)
		}
	}
	if strings.Index(tr, "arg=AAA") > strings.Index(tr, "arg=CCC") {
		t.Errorf("env options delivered before jobopts")
	}
	// optional plugin failed init: ignored, and its later hooks still ran
	if len(hooks(tr, "oplug")) < 3 {
		t.Errorf("optional plugin hooks missing")
	}
	// what the helper saw
	for i := 0; i < 2; i++ {
		rep := readFile(t, tio[i].report)
		if !strings.HasPrefix(rep, "uid=65534,65534,65534 gid=65534,65534,65534 cwd="+e.dir+" argc=3 argv=slurmstepd-go,task,spank\n") {
			t.Errorf("task %d report header: %s", i, strings.SplitN(rep, "\n", 2)[0])
		}
		var envs []string
		for _, l := range strings.Split(rep, "\n") {
			if strings.HasPrefix(l, "env ") {
				envs = append(envs, l[4:])
			}
		}
		got := strings.Join(envs, " ")
		want := fmt.Sprintf("TPLUG_TASK=%d _TIEE_SPANK_UNSET=TASKDROP", i)
		if got != want {
			t.Errorf("task %d exec env %q, want %q", i, got, want)
		}
	}
	if !strings.Contains(r.log.String(), "Invalid line. Ignoring.") {
		t.Errorf("bogus line not reported:\n%s", r.log.String())
	}
}

func TestRequiredInitFails(t *testing.T) {
	e := setup(t)
	conf := e.writeConf(t, "required "+e.so["tplug"]+" trace="+e.trace()+" fail=init")
	r := e.start(t)
	r.send(e.stepFields(conf))
	m := r.expect("FAIL")
	if m.get("phase") != "init" || m.get("plugin") != "tplug" || m.get("rc") != "-1" {
		t.Errorf("FAIL %v", m.kv)
	}
	r.wait(1)
	// stock: no exit hooks after a failed init
	if tr := readFile(t, e.trace()); strings.Contains(tr, "hook=exit") || strings.Contains(tr, "hook=init_post_opt") {
		t.Errorf("hooks after failed init:\n%s", tr)
	}
}

func TestRequiredUserInitFailsCallsExit(t *testing.T) {
	e := setup(t)
	conf := e.writeConf(t, "required "+e.so["tplug"]+" trace="+e.trace()+" fail=user_init")
	r := e.start(t)
	r.send(e.stepFields(conf))
	r.expect("READY")
	r.send([]string{"USER"})
	if m := r.expect("FAIL"); m.get("phase") != "user_init" {
		t.Errorf("FAIL %v", m.kv)
	}
	r.wait(1)
	if tr := readFile(t, e.trace()); !strings.Contains(tr, "hook=exit euid=0") {
		t.Errorf("exit hook not called after user_init failure:\n%s", tr)
	}
}

func TestRequiredTaskInitFails(t *testing.T) {
	e := setup(t)
	conf := e.writeConf(t, "required "+e.so["tplug"]+" trace="+e.trace()+" fail=task_init")
	r := e.start(t)
	r.send(e.stepFields(conf))
	r.ready()
	tio, _ := e.startTask(t, r, 0, "0")
	r.goTask(0)
	if m := r.expect("EXIT"); m.get("status") != strconv.Itoa(1<<8) {
		t.Errorf("EXIT %v, want status %d", m.kv, 1<<8)
	}
	r.reaped(0)
	r.send([]string{"FINI"})
	r.expect("DONE")
	r.wait(0)
	if b, _ := os.ReadFile(tio.report); len(b) != 0 {
		t.Errorf("helper ran after failed task_init: %s", b)
	}
	// The child writes its errors to the task's stderr, as slurmstepd's.
	if got := readFile(t, tio.stderr); !strings.Contains(got, "slurmstepd-n1: error: Failed to invoke spank plugin stack\n") ||
		!strings.Contains(got, "slurmstepd-n1: error: spank: required plugin tplug.so: task_init() failed with rc=-1\n") {
		t.Errorf("task stderr:\n%s\nlog:\n%s", got, r.log.String())
	}
}

func TestVersionMismatchRefused(t *testing.T) {
	e := setup(t)
	conf := e.writeConf(t,
		"optional "+e.so["oldplug"]+" trace="+e.trace(),
		"required "+e.so["oldplug"]+" trace="+e.trace())
	r := e.start(t)
	r.send(e.stepFields(conf))
	m := r.expect("FAIL")
	if m.get("phase") != "load" || !strings.Contains(m.get("msg"), "plugstack.conf:2") {
		t.Errorf("FAIL %v", m.kv)
	}
	r.wait(1)
	if !strings.Contains(r.log.String(), "Incompatible Slurm plugin") {
		t.Errorf("log:\n%s", r.log.String())
	}
}

func TestMissingPlugstackAndPrologEpilog(t *testing.T) {
	e := setup(t)
	r := e.start(t)
	f := e.stepFields(filepath.Join(e.dir, "nonexistent.conf"))
	f[1] = "mode=prolog"
	r.send(f)
	if m := r.expect("DONE"); m.get("rc") != "0" {
		t.Errorf("DONE %v", m.kv)
	}
	r.wait(0)

	conf := e.writeConf(t, "required "+e.so["tplug"]+" trace="+e.trace())
	r = e.start(t)
	f = e.stepFields(conf)
	f[1] = "mode=prolog"
	r.send(f)
	if m := r.expect("DONE"); m.get("rc") != "0" {
		t.Errorf("DONE %v", m.kv)
	}
	r.wait(0)
	tr := readFile(t, e.trace())
	if strings.Contains(tr, "hook=init ") || !strings.Contains(tr, "tplug prolog uid_rc=0 uid=65534 stepid_rc=3009") ||
		!strings.Contains(tr, "hook=job_prolog euid=0 ruid=0 egid=0 ctx=5") {
		t.Errorf("prolog trace:\n%s", tr)
	}
}

func TestEOFKillsTasks(t *testing.T) {
	e := setup(t)
	conf := e.writeConf(t, "required "+e.so["tplug"]+" trace="+e.trace())
	r := e.start(t)
	r.send(e.stepFields(conf))
	r.ready()
	_, pid := e.startTask(t, r, 0, "sleep")
	r.goTask(0)
	// wait until the helper runs
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(e.dir, "report0"))
		if len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("task did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	unix.Close(r.fd)
	r.wait(1)
	for deadline = time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d survived EOF: %s", pid, st)
		}
	}
	if tr := readFile(t, e.trace()); strings.Contains(tr, "hook=exit") || strings.Contains(tr, "hook=task_exit") {
		t.Errorf("hooks called after EOF:\n%s", tr)
	}
}

func TestDebianSpankPBS(t *testing.T) {
	const pbs = "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pbs.so"
	if _, err := os.Stat(pbs); err != nil {
		t.Fatalf("%v: slurm-wlm-basic-plugins (with slurmd, scripts/install-deps.sh) ships it", err)
	}
	e := setup(t)
	conf := e.writeConf(t, "required "+pbs)
	r := e.start(t)
	f := e.stepFields(conf)
	r.send(f)
	r.ready()
	tio, _ := e.startTask(t, r, 0, "0", "env=SLURM_JOB_ID=4242", "env=SLURM_NODEID=0", "env=SLURM_SUBMIT_DIR=/tmp")
	r.goTask(0)
	if m := r.expect("EXIT"); m.get("status") != "0" {
		t.Errorf("EXIT %v", m.kv)
	}
	r.reaped(0)
	r.send([]string{"FINI"})
	r.expect("DONE")
	r.wait(0)
	rep := readFile(t, tio.report)
	for _, want := range []string{"env PBS_JOBID=4242", "env PBS_NODENUM=0", "env PBS_O_WORKDIR=/tmp", "env PBS_TASKNUM=3"} {
		if !strings.Contains(rep, want+"\n") {
			t.Errorf("report lacks %s:\n%s", want, rep)
		}
	}
}
