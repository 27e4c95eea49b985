package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestUser is the ordinary (non-root) account for Run(t, TestUser, ...).
const TestUser = "tieeuser"

// SlurmTimeLayout is how the client commands print times with
// SLURM_TIME_FORMAT=standard (which Run sets): "%FT%T", local time.
const SlurmTimeLayout = "2006-01-02T15:04:05"

// Run runs a Slurm client command (sinfo, scontrol, ...) against this cluster:
// SLURM_CONF is set, SLURM_TIME_FORMAT=standard, no other SLURM_* variable leaks in.
// user "" or "root" runs as root; any other name runs as that user via setpriv
// (TestUser is created on first use). Bounded by clientCmdTimeout. Any goroutine.
func (c *Cluster) Run(t testing.TB, user string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return c.RunEnv(t, user, nil, args...)
}

// RunEnv is Run with extra environment entries ("KEY=value"), e.g.
// SLURMD_NODENAME=t2 for `scontrol show slurmd`. Any goroutine.
func (c *Cluster) RunEnv(t testing.TB, user string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return c.Exec(t, Cmd{User: user, Env: env, Args: args})
}

// Cmd is one client command for Exec.
type Cmd struct {
	// User runs the command: "" or "root" as root, any other name through setpriv
	// with that user's uid, gid and groups (TestUser is created on first use).
	User string
	// Args is the command line; Args[0] is looked up in PATH.
	Args []string
	// Dir is the working directory (default "/").
	Dir string
	// Env entries ("KEY=value") are added last (they win).
	Env []string
	// CleanEnv starts from a fixed environment (CleanPath, HOME, USER, LOGNAME,
	// SLURM_CONF, SLURM_TIME_FORMAT=standard) instead of the test binary's: what a
	// job inherits from sbatch is then the same on every machine and cluster.
	CleanEnv bool
	// Stdin is the command's standard input (default: none).
	Stdin string
}

// CleanPath is PATH in a CleanEnv command.
const CleanPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Exec runs a client command against this cluster: SLURM_CONF is set,
// SLURM_TIME_FORMAT=standard, no other SLURM_* variable of the test binary leaks in.
// It runs where the cluster's daemons run (the release's root, the cluster's mount
// namespace). Bounded by clientCmdTimeout. Any goroutine.
func (c *Cluster) Exec(t testing.TB, cm Cmd) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientCmdTimeout)
	defer cancel()
	cmd, err := c.command(ctx, cm)
	if err != nil {
		return "", "", err
	}
	var o, e strings.Builder
	cmd.Stdout = &o
	cmd.Stderr = &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("cluster: %q timed out after %v: %w", cm.Args, clientCmdTimeout, err)
	} else if err != nil {
		err = fmt.Errorf("cluster: %q as %q: %w", cm.Args, userOrRoot(cm.User), err)
	}
	return o.String(), e.String(), err
}

func userOrRoot(u string) string {
	if u == "" {
		return "root"
	}
	return u
}

// MustRun is Run that fails the test on a non-zero exit. It returns stdout.
func (c *Cluster) MustRun(t testing.TB, user string, args ...string) string {
	t.Helper()
	out, errOut, err := c.Run(t, user, args...)
	if err != nil {
		t.Fatalf("%v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	return out
}

var userMu sync.Mutex // serializes useradd within this process

// lookupUser returns uid/gid of name, creating TestUser (idempotently) if missing.
func lookupUser(name string) (uid, gid string, err error) {
	userMu.Lock()
	defer userMu.Unlock()
	if u, err := user.Lookup(name); err == nil {
		return u.Uid, u.Gid, nil
	}
	if name != TestUser {
		return "", "", fmt.Errorf("cluster: user %s does not exist", name)
	}
	out, err := runBounded(exec.Command("useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name), clientCmdTimeout)
	// 9 = "already exists": another test binary won the race.
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 9) {
		return "", "", fmt.Errorf("cluster: useradd %s: %w: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return "", "", fmt.Errorf("cluster: user %s after useradd: %w", name, err)
	}
	return u.Uid, u.Gid, nil
}

// WaitFor polls cond every pollInterval until it returns true, failing the test
// after timeout with what and cond's last status. Test goroutine only.
func (c *Cluster) WaitFor(t testing.TB, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, status := cond()
		if ok {
			return
		}
		last = status
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s: timed out after %v waiting for %s; last: %s", c.Name, timeout, what, last)
		}
		time.Sleep(pollInterval)
	}
}

// NodeStates returns the sinfo state (%T: "idle", "idle*", "down*", "mixed", ...)
// of every node in a partition, plus, for names not in any partition, the lower-cased
// State= of `scontrol show node`. Any goroutine.
func (c *Cluster) NodeStates(t testing.TB, names ...string) (map[string]string, error) {
	t.Helper()
	out, errOut, err := c.Run(t, "", "sinfo", "-h", "-N", "-a", "-o", "%N %T")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut))
	}
	st := ParseSinfoStates(out)
	for _, n := range names {
		if _, ok := st[n]; ok {
			continue
		}
		fields, err := c.ShowNodeErr(t, n)
		if err != nil {
			continue
		}
		st[n] = strings.ToLower(fields["State"])
	}
	return st, nil
}

// ParseSinfoStates parses `sinfo -h -N -o '%N %T'`.
func ParseSinfoStates(out string) map[string]string {
	st := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			st[f[0]] = f[1]
		}
	}
	return st
}

// StateMatches reports whether got is one of the '|'-separated states in want
// (case-insensitive), e.g. want "down|down*".
func StateMatches(got, want string) bool {
	for _, w := range strings.Split(want, "|") {
		if strings.EqualFold(strings.TrimSpace(w), got) {
			return true
		}
	}
	return false
}

// WaitNodes waits until every named node's state matches state ("idle", or
// alternatives such as "down|down*"). Test goroutine only.
func (c *Cluster) WaitNodes(t testing.TB, state string, names []string, timeout time.Duration) {
	t.Helper()
	c.WaitFor(t, fmt.Sprintf("nodes %v to be %q", names, state), timeout, func() (bool, string) {
		st, err := c.NodeStates(t, names...)
		if err != nil {
			return false, err.Error() + c.deadDaemons()
		}
		ok := true
		var parts []string
		for _, n := range names {
			parts = append(parts, n+"="+st[n])
			if !StateMatches(st[n], state) {
				ok = false
			}
		}
		return ok, strings.Join(parts, " ") + c.deadDaemons()
	})
}

// deadDaemons names harness daemons that exited although nobody stopped them.
func (c *Cluster) deadDaemons() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var d []string
	if c.ns != nil && c.ns.exited() {
		d = append(d, c.ns.status())
	}
	if c.ctld != nil && c.ctld.exited() {
		d = append(d, c.ctld.status())
	}
	for _, p := range c.procs {
		if p.exited() {
			d = append(d, p.status())
		}
	}
	if len(d) == 0 {
		return ""
	}
	sort.Strings(d)
	return " (exited: " + strings.Join(d, "; ") + ")"
}

// ShowNode returns the fields of `scontrol show node name` (failing the test on error).
func (c *Cluster) ShowNode(t testing.TB, name string) map[string]string {
	t.Helper()
	f, err := c.ShowNodeErr(t, name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return f
}

// ShowNodeErr is ShowNode returning the error. Any goroutine.
func (c *Cluster) ShowNodeErr(t testing.TB, name string) (map[string]string, error) {
	t.Helper()
	out, errOut, err := c.Run(t, "", "scontrol", "show", "node", name)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut))
	}
	return ParseShowNode(out), nil
}

// wholeLineKeys are `scontrol show node` fields printed alone on a line whose value
// may contain spaces.
var wholeLineKeys = []string{"OS=", "Reason=", "Comment=", "Extra="}

// ParseShowNode parses the multi-line `scontrol show node <one node>` output into
// Key -> value. Values of OS/Reason/Comment/Extra keep their spaces.
func ParseShowNode(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		if s == "" {
			continue
		}
		whole := false
		for _, k := range wholeLineKeys {
			if strings.HasPrefix(s, k) {
				m[strings.TrimSuffix(k, "=")] = strings.TrimSpace(s[len(k):])
				whole = true
				break
			}
		}
		if whole {
			continue
		}
		for _, f := range strings.Fields(s) {
			k, v, ok := strings.Cut(f, "=")
			if ok {
				m[k] = v
			}
		}
	}
	return m
}

// ShowSlurmd runs `scontrol show slurmd` with SLURMD_NODENAME=node (Debian's Slurm is
// built with MULTIPLE_SLURMD: scontrol then sends REQUEST_DAEMON_STATUS to that
// node's NodeAddr:Port from slurm.conf; with node "" it asks localhost:SlurmdPort).
// It returns "Key" -> "value" of the "Key = value" lines. Fails the test on error.
func (c *Cluster) ShowSlurmd(t testing.TB, user, node string) map[string]string {
	t.Helper()
	f, err := c.ShowSlurmdErr(t, user, node)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return f
}

// ShowSlurmdErr is ShowSlurmd returning the error. Any goroutine.
func (c *Cluster) ShowSlurmdErr(t testing.TB, user, node string) (map[string]string, error) {
	t.Helper()
	var env []string
	if node != "" {
		env = append(env, "SLURMD_NODENAME="+node)
	}
	out, errOut, err := c.RunEnv(t, user, env, "scontrol", "show", "slurmd")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut))
	}
	m := ParseShowSlurmd(out)
	if len(m) == 0 {
		return nil, fmt.Errorf("cluster: scontrol show slurmd (%s): no fields in %q (stderr %q)", node, out, errOut)
	}
	return m, nil
}

// ParseShowSlurmd parses slurm_print_slurmd_status output ("Slurmd PID  = 123").
func ParseShowSlurmd(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}

// ParseSlurmTime parses a time printed with SLURM_TIME_FORMAT=standard (local time).
func ParseSlurmTime(s string) (time.Time, error) {
	return time.ParseInLocation(SlurmTimeLayout, s, time.Local)
}

// Atoi is strconv.Atoi that fails the test with the field's name.
func Atoi(t testing.TB, what, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("cluster: %s = %q is not a number: %v", what, s, err)
	}
	return n
}
