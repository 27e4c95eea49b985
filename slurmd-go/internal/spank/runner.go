//go:build linux

package spank

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
)

// Timeouts. Hooks have none in stock slurmstepd; these bound how long the
// step manager waits on a runner that stopped answering.
const (
	// HookTimeout bounds init through user_init (READY) and the exit hooks
	// (DONE): pyxis imports a container image in user_init.
	HookTimeout = 10 * time.Minute
	// ForkTimeout bounds one task's fork and task_init_privileged (PID).
	ForkTimeout = 2 * time.Minute
	// SendTimeout bounds writing one packet.
	SendTimeout = 30 * time.Second
)

// Modes of a runner (PROTOCOL.md STEP mode=).
const (
	ModeTasks  = "tasks"
	ModeBatch  = "batch"
	ModeExtern = "extern"
	ModeProlog = "prolog"
	ModeEpilog = "epilog"
	ModeSlurmd = "slurmd"
)

// Option is one SPANK option from the launch message (OPT_TYPE_SPANK);
// Null: its optarg was NULL (a flag), which plugins see as such.
type Option struct {
	Name, Plugin, Value string
	Null                bool
}

// Step is what the runner's STEP packet carries.
type Step struct {
	Mode                 string
	PlugStack, PluginDir string
	Helper               string // slurmstepd-go, exec'd by each task
	SlurmVersion         string // "22.05.8": S_SLURM_VERSION, plugin_version's major.minor
	UID, GID             uint32
	User                 string
	Groups               []uint32
	Cwd                  string
	JobID, StepID        uint32
	NNodes, NodeID       uint32
	TotalTasks, NCPUs    uint32
	CPUsPerTask          uint32
	RestartCount         uint32
	JobAllocCores        string
	StepAllocCores       string
	JobAllocMem          uint64
	StepAllocMem         uint64
	ArrayID, ArrayTaskID uint32
	Tasks                []uint32 // global ids of the local tasks, in local order
	Argv, Env            []string
	Options              []Option
	// NodeName and ErrTimestamp make a task child's error lines on the
	// task's stderr look like slurmstepd's ("slurmstepd-<node>: error: ",
	// 26.05's "[<time>] error: ").
	NodeName     string
	ErrTimestamp bool
}

// VersionNumber is SLURM_VERSION_NUMBER of "major.minor.micro".
func VersionNumber(v string) (uint32, error) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return 0, fmt.Errorf("spank: version %q: want major.minor.micro", v)
	}
	var n [3]uint64
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 10, 8)
		if err != nil {
			return 0, fmt.Errorf("spank: version %q: %w", v, err)
		}
		n[i] = x
	}
	return uint32(n[0]<<16 | n[1]<<8 | n[2]), nil
}

// HookError is a required plugin's failure (FAIL).
type HookError struct {
	Phase, Plugin, Msg string
	RC                 int
}

func (e *HookError) Error() string {
	return fmt.Sprintf("spank: %s failed (plugin %q, rc %d): %s", e.Phase, e.Plugin, e.RC, e.Msg)
}

// Delta is what plugins changed in the step environment before the tasks
// (READY); in slurmd mode READY also says which job_script hooks exist.
type Delta struct {
	Set   []string // K=V
	Unset []string
	// HasProlog, HasEpilog: a plugin has slurm_spank_job_prolog/epilog.
	HasProlog, HasEpilog bool
}

// Apply returns env with the delta applied (env itself is not changed).
func (d Delta) Apply(env []string) []string {
	out := append([]string(nil), env...)
	for _, k := range d.Unset {
		out = unsetVar(out, k)
	}
set:
	for _, kv := range d.Set {
		k, _, _ := strings.Cut(kv, "=")
		for i, e := range out {
			if strings.HasPrefix(e, k+"=") {
				out[i] = kv // in place, as setenv does
				continue set
			}
		}
		out = append(out, kv)
	}
	return out
}

func unsetVar(env []string, k string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// TaskExit is one task's wait status as the runner reaped it.
type TaskExit struct {
	Local int
	Exit  proc.Exit
}

// StartCmd starts cmd outside any reaper and reports its exit (slurmd's
// runners: the daemon waits for its children itself).
func StartCmd(cmd *exec.Cmd) (<-chan proc.Exit, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan proc.Exit, 1)
	go func() {
		_ = cmd.Wait()
		e := proc.Exit{PID: cmd.Process.Pid}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			e.Status = ws
		}
		ch <- e
	}()
	return ch, nil
}

// Config is how a step manager starts runners.
type Config struct {
	Path string // bin/spank-runner
	// Start starts the runner process (the step manager's reaper owns its
	// children).
	Start func(*exec.Cmd) (<-chan proc.Exit, error)
	Log   hclog.Logger
	// ErrorLine gets the runner's error lines (the step's stderr).
	ErrorLine func(string)
}

// Runner is one started spank-runner.
type Runner struct {
	log  hclog.Logger
	pid  int
	conn *net.UnixConn
	exit <-chan proc.Exit
	// replies are the answers to requests, in order (the protocol is one
	// request, one answer; only EXIT and LOG come unasked).
	replies chan *packet
	exits   chan TaskExit
	dead    chan struct{} // closed when the runner's socket ends
	onLog   func(level, text string)

	mu      sync.Mutex
	werr    error
	forward bool // error lines go to ErrorLine (the step's I/O is up)
}

// Start starts the runner and sends it the step.
func Start(cfg Config, st Step) (*Runner, error) {
	vn, err := VersionNumber(st.SlurmVersion)
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spank: socketpair: %w", err)
	}
	for _, fd := range fds {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, MaxPacket)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, MaxPacket)
	}
	ours := os.NewFile(uintptr(fds[0]), "spank-runner")
	theirs := os.NewFile(uintptr(fds[1]), "spank-runner-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("spank: %w", err)
	}
	conn := fc.(*net.UnixConn)
	logR, logW, err := os.Pipe()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("spank: %w", err)
	}
	cmd := exec.Command(cfg.Path)
	cmd.Stdout, cmd.Stderr = logW, logW
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = []string{}
	exit, err := cfg.Start(cmd)
	logW.Close()
	if err != nil {
		logR.Close()
		conn.Close()
		return nil, fmt.Errorf("spank: start %s: %w", cfg.Path, err)
	}
	r := &Runner{
		log: cfg.Log, conn: conn, exit: exit, pid: cmd.Process.Pid,
		replies: make(chan *packet, 4),
		exits:   make(chan TaskExit, len(st.Tasks)+1), dead: make(chan struct{}),
	}
	r.onLog = func(level, text string) {
		r.logLine(level, text)
		r.mu.Lock()
		fw := r.forward
		r.mu.Unlock()
		if level == "error" && fw && cfg.ErrorLine != nil {
			cfg.ErrorLine(text)
		}
	}
	go r.logLines(logR)
	go r.read()

	p := newPacket("STEP").add("mode", st.Mode).add("node", st.NodeName).add("err_timestamp", flag(st.ErrTimestamp)).add("plugstack", st.PlugStack).add("plugindir", st.PluginDir).
		addU("version_number", uint64(vn)).add("slurm_version", st.SlurmVersion).add("helper", st.Helper).
		addU("uid", uint64(st.UID)).addU("gid", uint64(st.GID)).add("user", st.User).add("cwd", st.Cwd).
		addU("jobid", uint64(st.JobID)).addU("stepid", uint64(st.StepID)).
		addU("nnodes", uint64(st.NNodes)).addU("nodeid", uint64(st.NodeID)).
		addU("local_tasks", uint64(len(st.Tasks))).addU("total_tasks", uint64(st.TotalTasks)).
		addU("ncpus", uint64(st.NCPUs)).addU("cpus_per_task", uint64(st.CPUsPerTask)).
		addU("restart_count", uint64(st.RestartCount)).
		add("job_alloc_cores", st.JobAllocCores).add("step_alloc_cores", st.StepAllocCores).
		addU("job_alloc_mem", st.JobAllocMem).addU("step_alloc_mem", st.StepAllocMem).
		addU("array_id", uint64(st.ArrayID)).addU("array_task_id", uint64(st.ArrayTaskID))
	for _, g := range st.Groups {
		p.addU("sgid", uint64(g))
	}
	for _, t := range st.Tasks {
		p.addU("task", uint64(t))
	}
	for _, a := range st.Argv {
		p.add("argv", a)
	}
	for _, e := range st.Env {
		p.add("env", e)
	}
	for _, o := range st.Options {
		if o.Null {
			p.fields = append(p.fields, "jobopt="+o.Name+":"+o.Plugin)
		} else {
			p.add("jobopt", o.Name+":"+o.Plugin+"="+o.Value)
		}
	}
	if err := r.send(p, nil); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// logLines logs the lines the runner's task children write to its log fd
// ("spank-runner: <level>: text"); the runner itself sends LOG packets.
func (r *Runner) logLines(f *os.File) {
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "spank-runner: ")
		level, text, ok := strings.Cut(line, ": ")
		if !ok {
			level, text = "info", line
		}
		r.logLine(level, text)
	}
}

func (r *Runner) logLine(level, text string) {
	switch level {
	case "error":
		r.log.Error(text)
	case "debug", "debug2", "debug3":
		r.log.Debug(text, "level", level)
	case "verbose":
		r.log.Info(text, "level", level)
	default:
		r.log.Info(text)
	}
}

func (r *Runner) read() {
	defer close(r.dead)
	defer close(r.exits)
	buf := make([]byte, MaxPacket)
	for {
		n, _, _, _, err := r.conn.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				r.log.Warn("runner socket", "error", err)
			}
			return
		}
		p, err := decodePacket(buf[:n])
		if err != nil {
			r.log.Error("runner packet", "error", err)
			return
		}
		switch p.cmd {
		case "LOG":
			r.onLog(p.get("level"), p.get("text"))
		case "READY", "FAIL", "PID", "TASKFAIL", "POSTFORK", "TASKEXIT", "DONE":
			select {
			case r.replies <- p:
			default:
				r.log.Warn("runner: unexpected packet", "cmd", p.cmd)
			}
		case "EXIT":
			i, err1 := p.int("i")
			st, err2 := p.int("status")
			if err := errors.Join(err1, err2); err != nil {
				r.log.Error("runner packet", "error", err)
				continue
			}
			e := proc.Exit{Status: syscall.WaitStatus(st)}
			e.Rusage.Utime = syscall.NsecToTimeval(usec(p, "utime_us") * 1000)
			e.Rusage.Stime = syscall.NsecToTimeval(usec(p, "stime_us") * 1000)
			e.Rusage.Maxrss = usec(p, "maxrss_kb")
			e.Rusage.Minflt, e.Rusage.Majflt = usec(p, "minflt"), usec(p, "majflt")
			e.Rusage.Nvcsw, e.Rusage.Nivcsw = usec(p, "nvcsw"), usec(p, "nivcsw")
			e.Rusage.Inblock, e.Rusage.Oublock = usec(p, "inblock"), usec(p, "oublock")
			r.exits <- TaskExit{Local: int(i), Exit: e}
		default:
			r.log.Warn("runner: unknown packet", "cmd", p.cmd)
		}
	}
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func usec(p *packet, key string) int64 {
	n, _ := strconv.ParseInt(p.get(key), 10, 64)
	return n
}

func (r *Runner) send(p *packet, files []*os.File) error {
	b, err := p.encode()
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.werr != nil {
		return r.werr
	}
	_ = r.conn.SetWriteDeadline(time.Now().Add(SendTimeout))
	if _, _, err := r.conn.WriteMsgUnix(b, oob, nil); err != nil {
		r.werr = fmt.Errorf("spank: send %s: %w", p.cmd, err)
		return r.werr
	}
	return nil
}

// wait waits for the next reply, which must be what (or FAIL), the runner's
// end, or the timeout.
func (r *Runner) wait(what string, timeout time.Duration) (*packet, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	var p *packet
	select {
	case p = <-r.replies:
	case <-r.dead:
		// A packet may have arrived just before the end.
		select {
		case p = <-r.replies:
		default:
			return nil, fmt.Errorf("spank: runner ended before %s", what)
		}
	case <-t.C:
		return nil, fmt.Errorf("spank: no %s from the runner within %v", what, timeout)
	}
	switch p.cmd {
	case what:
		return p, nil
	case "FAIL":
		rc, _ := strconv.Atoi(p.get("rc"))
		return nil, &HookError{Phase: p.get("phase"), Plugin: p.get("plugin"), RC: rc, Msg: p.get("msg")}
	case "TASKFAIL":
		rc, _ := strconv.Atoi(p.get("rc"))
		return nil, &HookError{Phase: "fork", RC: rc, Msg: p.get("msg")}
	}
	return nil, fmt.Errorf("spank: runner answered %s, want %s", p.cmd, what)
}

func (p *packet) delta() Delta {
	return Delta{Set: p.all("set"), Unset: p.all("unset"), HasProlog: p.get("has_prolog") == "1", HasEpilog: p.get("has_epilog") == "1"}
}

// Ready waits until init, the options and init_post_opt ran: the step
// env's delta so far, or a *HookError.
func (r *Runner) Ready() (Delta, error) {
	p, err := r.wait("READY", HookTimeout)
	if err != nil {
		return Delta{}, err
	}
	return p.delta(), nil
}

// User runs user_init (tasks and batch modes), once the step's I/O is up:
// from now on the runner's error lines reach ErrorLine, as stock's errors
// reach srun from there on. It returns the step env's whole delta.
func (r *Runner) User() (Delta, error) {
	r.mu.Lock()
	r.forward = true
	r.mu.Unlock()
	if err := r.send(newPacket("USER"), nil); err != nil {
		return Delta{}, err
	}
	p, err := r.wait("READY", HookTimeout)
	if err != nil {
		return Delta{}, err
	}
	return p.delta(), nil
}

// Task has the runner fork local task i (pgid: 0 a new group, -1 the
// runner's, else that group) with fds (stdin, stdout, stderr, the helper's
// config pipe, extra fds) and returns its pid; the task waits at its gate
// until Go.
func (r *Runner) Task(i, pgid int, setsid, ctty bool, env []string, files []*os.File) (int, error) {
	p := newPacket("TASK").addU("i", uint64(i)).add("pgid", strconv.Itoa(pgid)).
		add("setsid", flag(setsid)).add("ctty", flag(ctty))
	for _, e := range env {
		p.add("env", e)
	}
	if err := r.send(p, files); err != nil {
		return 0, err
	}
	q, err := r.wait("PID", ForkTimeout)
	if err != nil {
		return 0, err
	}
	pid, err := q.int("pid")
	if err != nil {
		return 0, err
	}
	return int(pid), nil
}

// PID is the runner's pid: it is the step manager's, not the job's, and
// must outlive the step's kill to run the exit hooks.
func (r *Runner) PID() int { return r.pid }

// Go runs task_post_fork for task i and opens its gate; a required
// plugin's failure is a *HookError (the runner then kills its tasks).
func (r *Runner) Go(i int) error {
	if err := r.send(newPacket("GO").addU("i", uint64(i)), nil); err != nil {
		return err
	}
	_, err := r.wait("POSTFORK", HookTimeout)
	return err
}

// Reaped runs task_exit for task i.
func (r *Runner) Reaped(i int) error {
	if err := r.send(newPacket("REAPED").addU("i", uint64(i)), nil); err != nil {
		return err
	}
	_, err := r.wait("TASKEXIT", HookTimeout)
	return err
}

// Extern runs the extern step's task_post_fork for its sleep process.
func (r *Runner) Extern(pid int) error {
	if err := r.send(newPacket("EXTERN").addU("pid", uint64(pid)), nil); err != nil {
		return err
	}
	_, err := r.wait("POSTFORK", HookTimeout)
	return err
}

// Exits delivers the tasks' exits; closed when the runner's socket ends.
func (r *Runner) Exits() <-chan TaskExit { return r.exits }

// Fini runs the exit hooks and waits for the runner's DONE rc.
func (r *Runner) Fini() (int, error) {
	if err := r.send(newPacket("FINI"), nil); err != nil {
		return 0, err
	}
	return r.Done()
}

// Done waits for DONE (prolog/epilog modes send it without FINI).
func (r *Runner) Done() (int, error) {
	p, err := r.wait("DONE", HookTimeout)
	if err != nil {
		return 0, err
	}
	rc, _ := strconv.Atoi(p.get("rc"))
	return rc, nil
}

// Close ends the runner: on EOF it kills the tasks it forked and exits.
func (r *Runner) Close() {
	r.conn.Close()
	select {
	case <-r.exit:
	case <-time.After(SendTimeout):
		r.log.Warn("runner did not exit after its socket closed")
	}
}
