package userenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/envarray"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
)

// Fixed by every release's slurmd and env.c.
const (
	// LoadTimeout is how long slurmd lets su run ("Permit up to 120 second
	// delay before using cache file"), whatever sbatch's --get-user-env says.
	LoadTimeout = 120 * time.Second
	// ReapTimeout bounds the wait for su's process group after the SIGKILL
	// (stock polls three times a second apart, then leaves a zombie).
	ReapTimeout = 2 * time.Second
	// SuPath is SUCMD of Debian's build.
	SuPath = "/bin/su"
	// MaxOutput is ENV_BUFSIZE: stock fails on more output than that.
	MaxOutput = envarray.BufSize

	startToken = "XXXXSLURMSTARTPARSINGHEREXXXX"
	stopToken  = "XXXXSLURMSTOPPARSINGHEREXXXXX"

	// Name buffers: env_array_user_default parses into name[PATH_MAX],
	// _load_env_cache into name[256].
	suNameMax    = 4096
	cacheNameMax = 256
)

// Errors of Load, wrapped with the detail.
var (
	ErrNotRoot   = errors.New("userenv: SlurmdUser must be root to use --get-user-env")
	ErrTimeout   = errors.New("userenv: timeout waiting for " + SuPath + " to complete")
	ErrOverflow  = errors.New("userenv: buffer overflow loading env vars")
	ErrNoStart   = errors.New("userenv: failed to get current user environment variables")
	ErrNoStop    = errors.New("userenv: failed to get all user environment variables")
	ErrNoCache   = errors.New("userenv: could not open user environment cache")
	ErrBadConfig = errors.New("userenv: bad options")
)

// Options are the node's settings for one load.
type Options struct {
	// User is the job's user name.
	User string
	// StepdPath is the step manager binary; "<StepdPath> getenv" prints the
	// environment inside su (/bin/env or /usr/bin/env when it is missing).
	StepdPath string
	// NewNamespaces runs su in its own PID and mount namespaces (24.11 on),
	// where killing it kills everything the login scripts left behind.
	NewNamespaces bool
	// Cache: StateSaveLocation/env_cache is a fallback (22.05, 24.11).
	Cache bool
	// StateSaveLocation holds env_cache/<user>.
	StateSaveLocation string
	// GetEnvTimeout is slurm.conf's; with Cache, 0 reads the cache only.
	GetEnvTimeout uint16
	// NoEnvCache is SchedulerParameters no_env_cache: with Cache, a failed
	// su falls back to the cache only when it is set (stock's test is
	// inverted against its comment and the documentation; we do as it does).
	NoEnvCache bool
	// Timeout overrides LoadTimeout (tests); 0 is LoadTimeout.
	Timeout time.Duration
	// SuPath overrides SuPath (tests).
	SuPath string
}

// Load returns the user's login environment, or an error after which the
// job runs with the launch's environment alone (or is requeued, as
// RequeueOnFailure says). It blocks up to the timeout plus ReapTimeout: call
// it off the event loop. ctx ends it early (su is killed): a cancelled ctx
// gives an error that wraps context.Canceled and no cache fallback, a
// deadline of ctx before the timeout gives ErrTimeout.
func Load(ctx context.Context, o Options, log hclog.Logger) ([]string, error) {
	if o.User == "" || strings.ContainsAny(o.User, "/\x00") {
		return nil, fmt.Errorf("%w: user name %q", ErrBadConfig, o.User)
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if o.Cache && o.GetEnvTimeout == 0 {
		return loadCache(o, log)
	}
	env, err := loadSu(ctx, o, log)
	if err == nil {
		return env, nil
	}
	if errors.Is(err, context.Canceled) {
		// Nobody waits for an environment any more, the cache's neither.
		log.Info("loading user environment cancelled", "user", o.User)
		return nil, err
	}
	log.Error("failed to load current user environment variables", "user", o.User, "error", err)
	if o.Cache && o.NoEnvCache {
		return loadCache(o, log)
	}
	return nil, err
}

// RequeueOnFailure is whether a batch launch whose environment could not be
// loaded fails with ESLURMD_SETUP_ENVIRONMENT_ERROR (the job requeued held)
// instead of running with the passed environment: always from 26.05, before
// with SchedulerParameters no_env_cache or requeue_setup_env_fail.
func RequeueOnFailure(cache bool, schedulerParameters string) bool {
	if !cache {
		return true
	}
	p := strings.ToLower(schedulerParameters)
	return strings.Contains(p, "no_env_cache") || strings.Contains(p, "requeue_setup_env_fail")
}

// command is the shell command su runs: three blank lines, the markers
// around the environment dump.
func command(stepdPath string) string {
	envCmd := ""
	if helper(stepdPath) {
		envCmd = stepdPath + " " + CmdGetenv
	} else if _, err := os.Stat("/bin/env"); err == nil {
		envCmd = "/bin/env"
	} else {
		envCmd = "/usr/bin/env"
	}
	return fmt.Sprintf("/bin/echo; /bin/echo; /bin/echo; /bin/echo %s; %s; /bin/echo %s", startToken, envCmd, stopToken)
}

func loadSu(ctx context.Context, o Options, log hclog.Logger) ([]string, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = LoadTimeout
	}
	su := o.SuPath
	if su == "" {
		su = SuPath
	}
	if _, err := os.Stat(su); err != nil {
		return nil, fmt.Errorf("userenv: could not locate command %s: %w", su, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("userenv: pipe: %w", err)
	}
	defer pr.Close()
	cmdstr := command(o.StepdPath)
	argv := []string{"su", "-", o.User, "-c", cmdstr}
	cmd := &exec.Cmd{Path: su, Args: argv, Env: []string{"ENVIRONMENT=BATCH"}, Stdout: pw}
	// os/exec opens /dev/null for a nil Stdin and Stderr and passes no
	// other descriptor: stock's closeall(3).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if helper(o.StepdPath) {
		// su starts from the step manager binary's su-exec, which gives
		// it slurmd's open-files limit and, in new namespaces, a /proc.
		args := []string{filepath.Base(o.StepdPath), CmdSuExec}
		if o.NewNamespaces && nsEnabled() {
			args = append(args, "-proc")
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
		} else if o.NewNamespaces {
			log.Warn("pid or mnt namespaces are disabled, avoiding clone and falling back to fork. This can produce orphan/unconstrained processes!")
		}
		cmd.Path = o.StepdPath
		cmd.Args = append(append(args, su), argv...)
	}
	if log.IsDebug() {
		log.Debug("loading user environment", "user", o.User, "su", su, "command", cmdstr)
	}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("userenv: start %s: %w", cmd.Path, err)
	}
	pw.Close()
	pgid := cmd.Process.Pid
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	defer func() {
		// Typically a no-op: the group is gone once its stdout is closed.
		_ = proc.KillPG(pgid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		select {
		case <-waited:
		case <-time.After(ReapTimeout):
			log.Error("failed to kill program loading user environment", "user", o.User, "pid", pgid)
		}
	}()

	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pr.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = pr.SetReadDeadline(time.Now()) })
	defer stop()
	out, err := readAll(pr)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && errors.Is(ctx.Err(), context.Canceled):
		// The caller gave up (scancel of the job): no timeout to report.
		return nil, fmt.Errorf("userenv: loading the environment of %s: %w", o.User, ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("%w after %v", ErrTimeout, timeout)
	case err != nil:
		return nil, err
	}
	return ParseSu(out)
}

// helper is whether the step manager binary is there to run.
func helper(stepdPath string) bool {
	fi, err := os.Stat(stepdPath)
	return stepdPath != "" && err == nil && !fi.IsDir()
}

// readAll reads to EOF, at most MaxOutput bytes.
func readAll(r io.Reader) ([]byte, error) {
	buf := make([]byte, 0, 16*1024)
	for {
		if len(buf) == MaxOutput {
			return nil, ErrOverflow
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), MaxOutput)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("userenv: read(env pipe): %w", err)
		}
	}
}

// nsEnabled is the negation of 24.11's _ns_disabled: a namespace limit of 0
// disables them; an unreadable file is no limit.
func nsEnabled() bool {
	for _, p := range []string{"/proc/sys/user/max_pid_namespaces", "/proc/sys/user/max_mnt_namespaces"} {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == "0" {
			return false
		}
	}
	return true
}

// ParseSu extracts the environment from su's output: the lines after the
// first one starting with the start marker up to one starting with the stop
// marker (empty lines do not count, as with strtok).
func ParseSu(out []byte) ([]string, error) {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], startToken) {
		i++
	}
	if i == len(lines) {
		return nil, ErrNoStart
	}
	i++
	next := func() (string, bool) {
		if i >= len(lines) {
			return "", false
		}
		i++
		return lines[i-1], true
	}
	var env envarray.Env
	for {
		line, ok := next()
		if !ok {
			return nil, ErrNoStop
		}
		if strings.HasPrefix(line, stopToken) {
			return env, nil
		}
		add(&env, line, suNameMax, next)
	}
}

// add parses one NAME=value line (_env_array_entry_splitter with a name
// buffer of nameMax, _discard_env) and, for a bash function, the lines
// next gives until its braces balance, into e (env_array_overwrite).
func add(e *envarray.Env, line string, nameMax int, next func() (string, bool)) {
	name, value, ok := strings.Cut(line, "=")
	if !ok || len(name)+1 > nameMax || len(value)+1 > MaxOutput {
		return
	}
	switch name {
	case "DISPLAY", "ENVIRONMENT", "HOSTNAME":
		return
	}
	if strings.HasPrefix(value, "(") {
		for bracketCount(value) > 0 {
			l, ok := next()
			if !ok || len(value)+len(l) > MaxOutput-2 {
				break
			}
			value += "\n" + l
		}
	}
	e.Overwrite(name, value)
}

// bracketCount is _bracket_cnt: '{' minus '}'.
func bracketCount(s string) int {
	return strings.Count(s, "{") - strings.Count(s, "}")
}

// CachePath is where slurmd 22.05 and 24.11 look for a user's cached
// environment (written by contribs/env_cache_builder).
func CachePath(stateSaveLocation, user string) string {
	return stateSaveLocation + "/env_cache/" + user
}

func loadCache(o Options, log hclog.Logger) ([]string, error) {
	path := CachePath(o.StateSaveLocation, o.User)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrNoCache, path, err)
	}
	defer f.Close()
	log.Info("getting cached environment variables", "path", path)
	return ParseCache(f)
}

// ParseCache reads an env_cache file: NAME=value lines as fgets reads them
// (at most MaxOutput-1 bytes at a time), CR/LF stripped, bash functions
// joined across lines.
func ParseCache(r io.Reader) ([]string, error) {
	br := bufio.NewReaderSize(r, 64*1024)
	var readErr error
	fgets := func() (string, bool) {
		var b bytes.Buffer
		for b.Len() < MaxOutput-1 {
			c, err := br.ReadByte()
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				break
			}
			b.WriteByte(c)
			if c == '\n' {
				break
			}
		}
		if b.Len() == 0 {
			return "", false
		}
		return strings.TrimRight(b.String(), "\r\n"), true
	}
	var env envarray.Env
	for {
		line, ok := fgets()
		if !ok {
			break
		}
		add(&env, line, cacheNameMax, fgets)
	}
	if readErr != nil {
		return nil, fmt.Errorf("userenv: read cache: %w", readErr)
	}
	return env, nil
}
