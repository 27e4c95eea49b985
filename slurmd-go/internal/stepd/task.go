//go:build linux

package stepd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/cparse"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
)

// The task helper is the step manager binary run as "slurmstepd-go task":
// the step manager starts it (as root, in the job's session), places it in
// the job's cgroup, then sends it a taskConfig on fd 3; the helper becomes
// the user and execs the batch script (or TaskEpilog) in place, so the
// job's pid is the helper's. This is what slurmstepd's child does between
// fork and exec (mgr.c _fork_all_tasks, task.c exec_task), which Go cannot
// do in a forked child.

// Task helper modes.
const (
	modeJob    = "job"    // the batch script: TaskProlog, TMPDIR, rlimits, exec
	modeScript = "script" // TaskEpilog: become the user, chdir, exec
)

// taskConfig is what the step manager sends the helper.
type taskConfig struct {
	Mode     string `json:"mode"`
	NodeName string `json:"node_name"` // for "slurmstepd-<node>: error:" lines
	// Timestamped: the step manager's error lines start "[<time>] error: "
	// instead, as 26.05's do, in the task as in the step manager.
	Timestamped bool     `json:"timestamped,omitempty"`
	JobID       uint32   `json:"job_id"`
	UID         uint32   `json:"uid"`
	GID         uint32   `json:"gid"`
	Groups      []uint32 `json:"groups"`
	Cwd         string   `json:"cwd"`
	Argv        []string `json:"argv"`
	// Search is the command as srun gave it when it had no slash: the task
	// looks it up in PATH again once it is the user (stock's _build_path
	// runs after _become_user), so that a PATH entry the user cannot search
	// is skipped. Argv[0] is the step manager's lookup, for sattach.
	Search string   `json:"search,omitempty"`
	Env    []string `json:"env"`
	Umask  int      `json:"umask"` // -1: inherited
	Nice   *int     `json:"nice,omitempty"`
	// Propagate says which limits slurm.conf propagates (by RlimitTable name).
	Propagate   map[string]bool `json:"propagate"`
	StepMemMiB  uint64          `json:"step_mem_mib"`
	VSizeFactor uint16          `json:"vsize_factor"`
	TaskProlog  string          `json:"task_prolog"`
	// UserTaskProlog is srun's --task-prolog, run after TaskProlog.
	UserTaskProlog string `json:"user_task_prolog,omitempty"`
	// NoTmpdir: only local task 0 makes TMPDIR (task.c _make_tmpdir).
	NoTmpdir bool `json:"no_tmpdir,omitempty"`
	// LogLevel is the step's stderr log level (srun --slurmd-debug): the
	// helper's own lines at or below it go to the task's stderr.
	LogLevel int `json:"log_level,omitempty"`
	// LogTimestamp: 26.05's "[<time>] " line prefix.
	LogTimestamp bool `json:"log_timestamp,omitempty"`
	// StepID ("<job>.<step>"), TaskID, TaskNone (TaskPlugin task/none) and
	// MPINone (the step's MPI plugin is none) name the plugin hooks'
	// debug lines.
	StepID   string `json:"step_id,omitempty"`
	TaskID   uint32 `json:"task_id,omitempty"`
	TaskNone bool   `json:"task_none,omitempty"`
	MPINone  bool   `json:"mpi_none,omitempty"`
	// PrlimitLogs: 24.11's set_user_limits also logs the RSS limit it set
	// and the limits it leaves alone.
	PrlimitLogs bool `json:"prlimit_logs,omitempty"`
	// ParallelDebug (LAUNCH_PARALLEL_DEBUG): the task stops at its exec
	// for a debugger (pdebug_linux.go).
	ParallelDebug bool `json:"parallel_debug,omitempty"`
	// KeepFDs stay open across the exec (the MPI plugin's PMI_FD).
	KeepFDs []int `json:"keep_fds,omitempty"`
}

// taskConfigFD is the helper's config pipe.
const taskConfigFD = 3

// spankTaskArg: "slurmstepd-go task spank" is the helper exec'd by
// spank-runner's task child, already the user and past task_init; its
// environment is what the plugins changed in the task's (PROTOCOL.md).
const spankTaskArg = "spank"

// spankUnsetVar lists, \x1f-separated, the variables the plugins removed.
const spankUnsetVar = "_TIEE_SPANK_UNSET"

// Task is the helper's main: it never returns on success (exec).
func Task() int { return task(false) }

// SpankTask is Task for a task spank-runner forked.
func SpankTask() int { return task(true) }

func task(fromSpank bool) int {
	f := os.NewFile(taskConfigFD, "config")
	b, err := readFrameFrom(f)
	f.Close()
	// The job, its TaskProlog and TaskEpilog get fds 0-2 only, as stock's
	// tasks do: whatever else this helper holds closes at exec.
	_ = proc.CloseOnExecFrom(taskConfigFD)
	var c taskConfig
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		// The step manager went away before releasing us: do nothing.
		return 1
	}
	for _, fd := range c.KeepFDs {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return 1
		}
	}
	t := &taskRun{c: c, env: Env(c.Env), stderr: os.Stderr, dropped: fromSpank}
	if fromSpank {
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			if k == spankUnsetVar {
				for _, u := range strings.Split(v, "\x1f") {
					t.env.Unset(u)
				}
				continue
			}
			t.env.Overwrite(k, v)
		}
	}
	if c.Mode == modeScript {
		return t.script()
	}
	return t.job()
}

type taskRun struct {
	c      taskConfig
	env    Env
	stderr io.Writer
	// dropped: spank-runner's child made this process the user already
	// (and raised its limits and OOM score as root before).
	dropped bool
}

// logf writes one of slurmstepd's log lines, as its forked task logs it to
// the task's stderr, when the step's stderr level allows it.
func (t *taskRun) logf(level int, format string, args ...any) {
	if level > max(t.c.LogLevel, logError) {
		return
	}
	prefix := "slurmstepd-" + t.c.NodeName + ": "
	if t.c.LogTimestamp {
		prefix = "[" + logTimestamp(time.Now()) + "] "
	}
	fmt.Fprintf(t.stderr, "%s%s%s\n", prefix, logPrefix(level), fmt.Sprintf(format, args...))
}

// errorf writes a stock-style error line to the task's stderr (the job's
// stderr file): "slurmstepd-<node>: error: ...".
func (t *taskRun) errorf(format string, args ...any) {
	fmt.Fprintf(t.stderr, "%s%s\n", errorPrefix(t.c.NodeName, t.c.Timestamped), fmt.Sprintf(format, args...))
}

func (t *taskRun) becomeUser() error {
	groups := make([]int, len(t.c.Groups))
	for i, g := range t.c.Groups {
		groups[i] = int(g)
	}
	if len(groups) == 0 {
		groups = []int{int(t.c.GID)}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setregid(int(t.c.GID), int(t.c.GID)); err != nil {
		return fmt.Errorf("setregid: %w", err)
	}
	if err := syscall.Setreuid(int(t.c.UID), int(t.c.UID)); err != nil {
		return fmt.Errorf("setreuid: %w", err)
	}
	return nil
}

func (t *taskRun) job() int {
	if t.dropped {
		if t.c.Nice != nil {
			// As the user: only a positive adjustment can still apply.
			_ = unix.Setpriority(unix.PRIO_PROCESS, 0, *t.c.Nice)
		}
		return t.jobAsUser()
	}
	_ = proc.SetOOMScoreAdj(0, 0) // the tasks may be killed by OOM
	if t.c.Nice != nil {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, *t.c.Nice); err != nil {
			t.errorf("setpriority(PRIO_PROCESS, %d): %s", *t.c.Nice, strerror(err))
		}
	}
	// slurmd raises these soft limits to their maximum at startup and its
	// children inherit them (slurmd.c, rlimits_use_max_nofile).
	for _, r := range []int{unix.RLIMIT_CPU, unix.RLIMIT_CORE, unix.RLIMIT_NOFILE} {
		var l syscall.Rlimit
		if syscall.Getrlimit(r, &l) == nil {
			// Always set: syscall.Setrlimit(RLIMIT_NOFILE) also stops Go
			// from restoring its original soft limit at exec.
			l.Cur = l.Max
			_ = syscall.Setrlimit(r, &l)
		}
	}
	if err := t.becomeUser(); err != nil {
		t.errorf("_become_user failed: %s", strerror(err))
		return 1
	}
	return t.jobAsUser()
}

// jobAsUser is the batch script's or task's setup once it is the user.
func (t *taskRun) jobAsUser() int {
	if err := os.Chdir(t.c.Cwd); err != nil {
		t.errorf("couldn't chdir to `%s': %s: going to /tmp instead", t.c.Cwd, strerror(err))
		if err := os.Chdir("/tmp"); err != nil {
			t.errorf("couldn't chdir to /tmp either. dying.")
			return 1
		}
	}
	if t.c.Umask >= 0 {
		syscall.Umask(t.c.Umask)
	}
	if t.c.TaskProlog != "" {
		t.env.Setenvf("SLURM_SCRIPT_CONTEXT", "prolog_task")
		if status := t.runTaskProlog(t.c.TaskProlog, "slurm task_prolog"); status != 0 {
			t.errorf("TaskProlog failed status=%d", status)
			return status
		}
	}
	if t.c.UserTaskProlog != "" {
		t.env.Setenvf("SLURM_SCRIPT_CONTEXT", "prolog_task")
		if status := t.runTaskProlog(t.c.UserTaskProlog, "user task_prolog"); status != 0 {
			t.errorf("--task-prolog failed status=%d", status)
			return status
		}
	}
	if !t.c.NoTmpdir {
		t.makeTmpdir()
	}
	if len(t.c.Argv) == 0 || t.c.Argv[0] == "" {
		t.errorf("No executable program specified for this task")
		return 2
	}
	if t.c.MPINone {
		t.logf(logDebug, "mpi/none: mpi_p_slurmstepd_task: Using mpi/none")
	}
	if t.c.TaskNone {
		t.logf(logDebug, "task/none: task_p_pre_launch: task_p_pre_launch: StepId=%s, task %d", t.c.StepID, t.c.TaskID)
	}
	if !t.setUserLimits() {
		return 5
	}
	if t.c.Search != "" {
		t.c.Argv[0] = resolvePath(t.c.Search, t.env, t.c.Cwd)
	}
	return t.exec(t.c.Argv[0])
}

func (t *taskRun) script() int {
	if err := t.becomeUser(); err != nil {
		t.errorf("run_script_as_user _become_user failed: %s", strerror(err))
		return 127
	}
	if err := os.Chdir(t.c.Cwd); err != nil {
		t.errorf("run_script_as_user: couldn't change working dir to %s: %s", t.c.Cwd, strerror(err))
	}
	for {
		err := syscall.Exec(t.c.Argv[0], t.c.Argv, t.env)
		t.errorf("execve(%s): %s", t.c.Argv[0], strerror(err))
		if err != syscall.ENFILE && err != syscall.ENOMEM {
			return 127
		}
	}
}

// exec is the end of exec_task: execve, or stock's error report and
// _exit(errno).
func (t *taskRun) exec(path string) int {
	resetIgnoredSignals()
	if t.c.ParallelDebug {
		// Right before execve, not where stock calls it (before the PATH
		// search and the limits): a signal that reaches a tracee stops it,
		// and that stop before the exec would be one its tracer never
		// waits for. Nothing between the two logs or fails differently.
		t.traceMe()
	}
	err := syscall.Exec(path, t.c.Argv, t.env)
	errno, _ := err.(syscall.Errno)
	if errno == syscall.ENOENT {
		if f, oerr := os.Open(path); oerr == nil {
			buf := make([]byte, 256)
			n, _ := f.Read(buf)
			f.Close()
			if n >= 3 && string(buf[:2]) == "#!" {
				line := string(buf[2:min(n, 255)])
				if i := strings.IndexByte(line, '\n'); i >= 0 {
					line = line[:i]
				}
				t.errorf("execve(): bad interpreter(%s): %s", line, strerror(err))
				return int(errno)
			}
		}
	}
	t.errorf("execve(): %s: %s", path, strerror(err))
	if errno == 0 {
		return 1
	}
	return int(errno)
}

// resetIgnoredSignals gives the job default dispositions for signals this
// process inherited as ignored (a daemon started under nohup ignores
// SIGHUP; Go keeps SIGHUP and SIGINT ignored and exec keeps SIG_IGN).
// Stock jobs never inherit ignored signals: slurmd and slurmstepd install
// handlers, which exec resets.
func resetIgnoredSignals() {
	// Every signal, real-time ones included: whoever started the daemon
	// may have ignored any of them.
	for sig := syscall.Signal(1); sig <= 64; sig++ {
		if sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
			continue
		}
		var old sigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		if old.handler == 1 { // SIG_IGN
			dfl := sigaction{}
			unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		}
	}
}

// sigaction is the kernel's struct sigaction on amd64 and arm64 (handler,
// flags, restorer, mask); only the handler is looked at or set (SIG_DFL).
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// makeTmpdir is task.c _make_tmpdir (as the user).
func (t *taskRun) makeTmpdir() {
	dir, ok := t.env.Get("TMPDIR")
	if !ok {
		t.env.Setenvf("TMPDIR", "/tmp")
		return
	}
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return
	}
	st, serr := os.Stat(dir)
	switch {
	case serr != nil:
		t.errorf("Unable to create TMPDIR [%s]: %s", dir, strerror(err))
	case !st.IsDir():
		t.errorf("TMPDIR [%s] is not a directory", dir)
	case unix.Faccessat(unix.AT_FDCWD, dir, unix.X_OK|unix.W_OK, unix.AT_EACCESS) != nil:
		t.errorf("TMPDIR [%s] is not writeable", dir)
	default:
		return
	}
	t.errorf("Setting TMPDIR to /tmp")
	t.env.Setenvf("TMPDIR", "/tmp")
}

// runTaskProlog runs the TaskProlog as the user with the task's
// environment (run_command: stdin /dev/null, stdout and stderr captured, own
// process group) and applies its "export", "unset" and "print" lines. It
// returns the exit status, 1 if it did not exit normally.
func (t *taskRun) runTaskProlog(path, name string) int {
	cmd := exec.Command(path)
	cmd.Args = []string{path}
	cmd.Env = t.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// run_command: stdin /dev/null opened read-write, stdout and stderr one pipe.
	defer proc.AttachDevNull(cmd, false)()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
	default:
		t.errorf("%s did not exit normally. reason: %s", name, out.String())
		return 1
	}
	t.applyPrologOutput(out.String())
	return cmd.ProcessState.ExitCode()
}

// applyPrologOutput is task.c _proc_stdout.
func (t *taskRun) applyPrologOutput(out string) {
	for _, line := range strings.SplitAfter(out, "\n") {
		body := strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(body, "print "):
			rest := strings.TrimLeft(body[6:], " \t\n\v\f\r")
			os.Stdout.WriteString(rest + "\n")
		case strings.HasPrefix(body, "export "):
			rest := strings.TrimLeft(body[7:], " \t\n\v\f\r")
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				continue
			}
			name := strings.TrimRight(rest[:eq], " \t\n\v\f\r")
			t.env.Setenvf(name, rest[eq+1:])
		case strings.HasPrefix(body, "unset "):
			name := strings.TrimLeft(body[6:], " \t\n\v\f\r")
			name = strings.TrimRight(name, " \t\n\v\f\r")
			if name != "" {
				t.env.Unset(name)
			}
		}
	}
}

// setUserLimits is ulimits.c set_user_limits: the propagated soft limits
// from SLURM_RLIMIT_* (removed from the environment), then RSS and AS from
// the step's memory. It reports false where stock exits.
func (t *taskRun) setUserLimits() bool {
	var r syscall.Rlimit
	if syscall.Getrlimit(unix.RLIMIT_CPU, &r) == nil && r.Max != unix.RLIM_INFINITY {
		t.errorf("Slurm process CPU time limit is %d seconds", int(r.Max))
	}
	for _, rl := range proc.RlimitTable {
		t.setLimit(rl)
	}
	mem := t.c.StepMemMiB * 1024 * 1024
	rssErr := syscall.Getrlimit(unix.RLIMIT_RSS, &r)
	if mem != 0 && rssErr == nil && r.Max > mem {
		r.Max, r.Cur = mem, mem
		if err := syscall.Setrlimit(unix.RLIMIT_RSS, &r); err != nil {
			t.errorf("setrlimit(RLIMIT_RSS, %d MB): %s", t.c.StepMemMiB, strerror(err))
			return false
		}
		t.logf(logDebug2, "Set task rss(%d MB)", t.c.StepMemMiB)
		if t.c.PrlimitLogs && syscall.Getrlimit(unix.RLIMIT_RSS, &r) == nil {
			t.logf(logDebug2, "Task RSS limits from _prlimit: rlim_cur:%d rlim_max:%d", r.Cur, r.Max)
		}
	} else if t.c.PrlimitLogs && rssErr == nil {
		t.logf(logDebug2, "Not setting task rss rlimit, task bytes: %d, rlimit_max: %d", mem, r.Max)
	}
	asErr := syscall.Getrlimit(unix.RLIMIT_AS, &r)
	if mem != 0 && t.c.VSizeFactor != 0 && asErr == nil && r.Max > mem {
		r.Max = uint64(float64(mem) * (float64(t.c.VSizeFactor) / 100.0))
		r.Cur = r.Max
		if err := syscall.Setrlimit(unix.RLIMIT_AS, &r); err != nil {
			t.errorf("setrlimit(RLIMIT_AS, %d MB): %s", t.c.StepMemMiB, strerror(err))
			return false
		}
		t.logf(logDebug2, "Set task vsize(%d MB)", t.c.StepMemMiB)
		if t.c.PrlimitLogs && syscall.Getrlimit(unix.RLIMIT_AS, &r) == nil {
			t.logf(logDebug2, "task VSIZE limits: rlim_cur:%d rlim_max:%d", r.Cur, r.Max)
		}
	} else if t.c.PrlimitLogs && asErr == nil {
		t.logf(logDebug2, "Not setting task vsize rlimit, task bytes: %d, rlimit_max: %d", mem, r.Max)
	}
	return true
}

func (t *taskRun) setLimit(rl proc.RlimitInfo) {
	name := RlimitEnvName(rl.Name)
	val, ok := t.env.Get(name)
	if !ok {
		return
	}
	user := strings.HasPrefix(val, "U")
	num := strings.TrimPrefix(val, "U")
	v, ok := cStrtoul(num)
	if !ok {
		t.errorf("Invalid %s env var, value = `%s'", name, num)
		return
	}
	t.env.Unset(name)
	if !t.c.Propagate[rl.Name] && !user {
		return
	}
	var r syscall.Rlimit
	if err := syscall.Getrlimit(rl.Resource, &r); err != nil {
		t.errorf("getrlimit(RLIMIT_%s): %s", rl.Name, strerror(err))
		return
	}
	who := "conf"
	if user {
		who = "user"
	}
	if r.Cur == v {
		t.logf(logDebug2, "_set_limit: %s setrlimit RLIMIT_%s no change in value: %d", who, rl.Name, r.Cur)
		return
	}
	t.logf(logDebug2, "_set_limit: %-14s: max:%s cur:%s req:%s", "RLIMIT_"+rl.Name, rlimString(r.Max), rlimString(r.Cur), rlimString(v))
	r.Cur = v
	if !user && r.Cur > r.Max {
		t.logf(logVerbose, "_set_limit: %-14s: reducing req:%s to max:%s", "RLIMIT_"+rl.Name, rlimString(v), rlimString(r.Max))
		r.Cur = r.Max
	}
	// syscall.Setrlimit (not x/sys) so Go does not restore its original
	// RLIMIT_NOFILE at exec.
	if err := syscall.Setrlimit(rl.Resource, &r); err != nil {
		shown := strconv.FormatUint(r.Cur, 10)
		if r.Cur == unix.RLIM_INFINITY {
			shown = "'unlimited'"
		}
		if user {
			t.errorf("Can't propagate RLIMIT_%s of %s from submit host: %s", rl.Name, shown, strerror(err))
		} else {
			t.logf(logVerbose, "Can't propagate RLIMIT_%s of %s from submit host: %s", rl.Name, shown, strerror(err))
		}
		return
	}
	t.logf(logDebug2, "_set_limit: %s setrlimit RLIMIT_%s succeeded", who, rl.Name)
}

// rlimString is ulimits.c rlim_to_string.
func rlimString(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "inf"
	}
	return strconv.FormatUint(v, 10)
}

// cStrtoul parses like strtoul(s, &end, 10) followed by a check that the
// whole string was used (an empty string is 0).
func cStrtoul(s string) (uint64, bool) {
	v, n := cparse.Strtoul(s)
	if n == 0 {
		return 0, len(s) == 0
	}
	return v, n == len(s)
}

// strerror renders err like glibc's strerror (%m): Go's errno texts are
// glibc's with a lower-case first letter.
func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	if err == nil {
		return "Success"
	}
	return err.Error()
}

// strsignal is glibc's strsignal(3) for the signals a step is cancelled
// with: Go's description with glibc's capital ("Terminated", "Killed").
func strsignal(sig syscall.Signal) string {
	s := sig.String()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
