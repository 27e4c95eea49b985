package cluster

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// JobTerminalStates are the base states a job never leaves by itself (scontrol's
// JobState; "COMPLETING" is shown instead while the nodes are still cleaning up).
var JobTerminalStates = []string{
	"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
	"BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
}

// RandomNodePrefix is a NodePrefix unique to one cluster ("b" + four lower-case
// letters + "n", e.g. "bqxkzn" for nodes bqxkzn1..4). Use it where something
// machine-wide is named after the node: with cgroups the stock slurmd (MULTIPLE_SLURMD)
// puts every job under /sys/fs/cgroup/<ctrl>/slurm_<NodeName>/uid_<u>/job_<id>, so two
// clusters on one host with the same node names and job ids would share cgroups.
func RandomNodePrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return "b" + string(b) + "n"
}

// WorkDir is Dir/work/<user>[/sub...], created on first use, every level below
// Dir/work owned by the user (mode 0755): a directory where a job of that user may
// write its output. Any goroutine.
func (c *Cluster) WorkDir(t testing.TB, user string, sub ...string) string {
	t.Helper()
	if user == "" {
		user = "root"
	}
	uid, gid, err := lookupUser(user)
	if err != nil {
		t.Fatalf("%v", err)
	}
	top := filepath.Join(c.Dir, "work")
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	d := top
	for _, s := range append([]string{user}, sub...) {
		d = filepath.Join(d, s)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("cluster: %v", err)
		}
		if err := os.Chown(d, Atoi(t, "uid", uid), Atoi(t, "gid", gid)); err != nil {
			t.Fatalf("cluster: chown %s: %v", d, err)
		}
	}
	return d
}

// LookupUser returns the uid and gid of a user ("" = root), creating TestUser if
// it does not exist yet. Any goroutine.
func LookupUser(user string) (uid, gid int, err error) {
	if user == "" {
		user = "root"
	}
	u, g, err := lookupUser(user)
	if err != nil {
		return 0, 0, err
	}
	uid, err = strconv.Atoi(u)
	if err != nil {
		return 0, 0, fmt.Errorf("cluster: uid of %s: %w", user, err)
	}
	gid, err = strconv.Atoi(g)
	if err != nil {
		return 0, 0, fmt.Errorf("cluster: gid of %s: %w", user, err)
	}
	return uid, gid, nil
}

// Sbatch submits script as user in WorkDir(user); see SbatchIn. Any goroutine.
func (c *Cluster) Sbatch(t testing.TB, user, script string, args ...string) string {
	t.Helper()
	return c.SbatchIn(t, user, c.WorkDir(t, user), script, args...)
}

// SbatchIn submits script (given to sbatch on stdin; "" when args name a file or use
// --wrap) as user with `sbatch --parsable args...`, run in dir (the job's default
// working directory and SLURM_SUBMIT_DIR) with a clean environment (Cmd.CleanEnv),
// and returns the job id. Fails the test if sbatch fails. Any goroutine.
func (c *Cluster) SbatchIn(t testing.TB, user, dir, script string, args ...string) string {
	t.Helper()
	id, err := c.SbatchErr(user, dir, script, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return id
}

// SbatchErr is SbatchIn returning the error (with sbatch's stderr) instead of
// failing a test: for goroutines that submit in bulk. Any goroutine.
func (c *Cluster) SbatchErr(user, dir, script string, args ...string) (string, error) {
	out, errOut, err := c.Exec(c.t, Cmd{
		User:     user,
		Args:     append([]string{"sbatch", "--parsable"}, args...),
		Dir:      dir,
		CleanEnv: true,
		Stdin:    script,
	})
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("cluster %s: sbatch printed %q (stderr %q), want a job id", c.Name, out, errOut)
	}
	return id, nil
}

// showJobKey matches the start of one "Key=value" field of `scontrol show job -o`.
var showJobKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_:/]*=`)

// ParseShowJob parses one line of `scontrol show job -o`. A value may contain spaces
// (Reason, Comment, Command with arguments): a word that does not start with
// "Key=" continues the previous value.
func ParseShowJob(line string) map[string]string {
	m := map[string]string{}
	last := ""
	for _, w := range strings.Split(strings.TrimSpace(line), " ") {
		if showJobKey.MatchString(w) {
			k, v, _ := strings.Cut(w, "=")
			m[k] = v
			last = k
			continue
		}
		if last != "" {
			m[last] += " " + w
		}
	}
	return m
}

// ShowJobsErr returns every record of `scontrol show job -o [id]` (all jobs for id
// "", each task for an array's id). Any goroutine.
func (c *Cluster) ShowJobsErr(t testing.TB, id string) ([]map[string]string, error) {
	t.Helper()
	args := []string{"scontrol", "show", "job", "-o"}
	if id != "" {
		args = append(args, id)
	}
	out, errOut, err := c.Run(t, "", args...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut))
	}
	var recs []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "No jobs") {
			continue
		}
		recs = append(recs, ParseShowJob(line))
	}
	return recs, nil
}

// ShowJob returns the fields of `scontrol show job -o id` for a single job (fatal if
// the command fails or prints other than one record). Any goroutine.
func (c *Cluster) ShowJob(t testing.TB, id string) map[string]string {
	t.Helper()
	recs, err := c.ShowJobsErr(t, id)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if len(recs) != 1 {
		t.Fatalf("cluster %s: scontrol show job %s: %d records, want 1", c.Name, id, len(recs))
	}
	return recs[0]
}

// AllJobs is every job slurmctld still knows (until MinJobAge after the end), by
// JobId (array tasks under their own JobId). Any goroutine.
func (c *Cluster) AllJobs(t testing.TB) map[string]map[string]string {
	t.Helper()
	recs, err := c.ShowJobsErr(t, "")
	if err != nil {
		t.Fatalf("%v", err)
	}
	m := map[string]map[string]string{}
	for _, r := range recs {
		m[r["JobId"]] = r
	}
	return m
}

// Squeue lists the jobs squeue shows by default (pending, running, suspended,
// completing, ...; not finished ones), one array task per line, as "%i %T"
// ("123 RUNNING", "120_7 COMPLETING"), sorted. Any goroutine.
func (c *Cluster) Squeue(t testing.TB) []string {
	t.Helper()
	out := c.MustRun(t, "", "squeue", "-h", "-a", "-r", "-o", "%i %T")
	var l []string
	for _, line := range strings.Split(out, "\n") {
		if s := strings.TrimSpace(line); s != "" {
			l = append(l, s)
		}
	}
	sort.Strings(l)
	return l
}

// WaitJob waits until the JobState of job id is one of states and returns its
// `scontrol show job` fields. It fails at once if the job reaches a terminal state
// not in states (JobTerminalStates), and after timeout otherwise. Test goroutine of
// t only.
func (c *Cluster) WaitJob(t testing.TB, id string, timeout time.Duration, states ...string) map[string]string {
	t.Helper()
	var f map[string]string
	c.WaitFor(t, fmt.Sprintf("job %s to be %v", id, states), timeout, func() (bool, string) {
		recs, err := c.ShowJobsErr(t, id)
		if err != nil {
			return false, err.Error() + c.deadDaemons()
		}
		if len(recs) != 1 {
			return false, fmt.Sprintf("%d records", len(recs))
		}
		f = recs[0]
		st := f["JobState"]
		if slices.Contains(states, st) {
			return true, st
		}
		if slices.Contains(JobTerminalStates, st) {
			t.Fatalf("cluster %s: job %s is %s (Reason=%s ExitCode=%s), want %v", c.Name, id, st, f["Reason"], f["ExitCode"], states)
		}
		return false, fmt.Sprintf("JobState=%s Reason=%s NodeList=%s", st, f["Reason"], f["NodeList"]) + c.deadDaemons()
	})
	return f
}

// Bounds of Stop's job cleanup.
const (
	cancelJobsTimeout = 20 * time.Second // scancel until squeue is empty: MAX(KillWait,5) + Epilog
	leftoverExitWait  = 5 * time.Second  // SIGKILLed leftovers are gone from their cgroups
)

// cancelJobs cancels every job slurmctld still has queued or running and waits
// (bounded) until none is left, so that no slurmstepd outlives the cluster.
func (c *Cluster) cancelJobs(t testing.TB) {
	out, _, err := c.Run(t, "", "squeue", "-h", "-o", "%A")
	if err != nil {
		t.Logf("cluster %s: squeue before stop: %v", c.Name, err)
		return
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return
	}
	t.Logf("cluster %s: cancelling %d jobs left at stop", c.Name, len(ids))
	if _, errOut, err := c.Run(t, "", append([]string{"scancel"}, ids...)...); err != nil {
		t.Logf("cluster %s: scancel: %v: %s", c.Name, err, errOut)
	}
	deadline := time.Now().Add(cancelJobsTimeout)
	for time.Now().Before(deadline) {
		out, _, err := c.Run(t, "", "squeue", "-h", "-o", "%A")
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(pollInterval)
	}
	t.Logf("cluster %s: jobs still queued %v after scancel", c.Name, cancelJobsTimeout)
}

// killLeftovers SIGKILLs (by pid) what this cluster's node daemons left running after
// they stopped: step managers (argv[0] "slurmstepd...") with a file open under Dir and
// every process in one of the cluster's cgroups (slurm_<NodeName>).
func (c *Cluster) killLeftovers(t testing.TB) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if c.ownsProcess(pid) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed = append(killed, pid)
			}
		}
	}
	if len(killed) == 0 {
		return
	}
	t.Logf("cluster %s: killed %d processes left behind by its node daemons: %v", c.Name, len(killed), killed)
	deadline := time.Now().Add(leftoverExitWait)
	for _, pid := range killed {
		for time.Now().Before(deadline) {
			if err := syscall.Kill(pid, 0); err != nil {
				break
			}
			time.Sleep(pollInterval / 5)
		}
	}
}

// ownsProcess reports whether pid is in one of this cluster's cgroups, or is a
// slurmstepd with a file open under Dir.
func (c *Cluster) ownsProcess(pid int) bool {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	if cg, err := os.ReadFile(filepath.Join(proc, "cgroup")); err == nil {
		for _, n := range c.Nodes {
			if strings.Contains(string(cg), "/slurm_"+n.Name+"/") {
				return true
			}
		}
	}
	// The stock slurmstepd renames itself "slurmstepd: [<job>.<step>]"; a Go step
	// manager runs as ".../slurmstepd-go ...".
	cmd, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	argv0, _, _ := strings.Cut(string(cmd), "\x00")
	if err != nil || !strings.HasPrefix(filepath.Base(argv0), "slurmstepd") {
		return false
	}
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		// A step manager in a chroot shows its files under the root's bind of /tmp
		// or /dev (<root>/tmp/ti-...): Dir is random, so containing it is enough.
		if l, err := os.Readlink(filepath.Join(proc, "fd", fd.Name())); err == nil && strings.Contains(l, c.Dir+"/") {
			return true
		}
	}
	return false
}

// removeCgroups removes, bottom-up, the empty cgroup directories slurm_<node> the
// node daemons of this cluster created under each mounted cgroup hierarchy. A
// directory that still holds a process stays (and is logged).
func (c *Cluster) removeCgroups(t testing.TB) {
	roots, err := cgroupMounts()
	if err != nil {
		t.Logf("cluster: cgroup cleanup: %v", err)
		return
	}
	for _, r := range roots {
		for _, n := range c.Nodes {
			d := filepath.Join(r, "slurm_"+n.Name)
			if _, err := os.Stat(d); err != nil {
				continue
			}
			var dirs []string
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			// Deepest first: WalkDir lists parents before children.
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := os.Remove(dirs[i]); err != nil {
					t.Logf("cluster: cgroup cleanup: %v", err)
				}
			}
		}
	}
}

// cgroupMounts lists the mount points of every cgroup (v1) and cgroup2 file system.
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var roots []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			roots = append(roots, f[1])
		}
	}
	return roots, nil
}
