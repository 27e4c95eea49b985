//go:build integration

// Issue 11 finding 4, the extern step: with PrologFlags=Contain slurmctld sends
// REQUEST_LAUNCH_PROLOG at allocation and the node starts the job's extern step
// (SLURM_EXTERN_CONT), whose step manager holds the job's container with a sleeping
// process. Debian's pam_slurm_adopt (libpam-slurm-adopt of the cluster's release)
// finds the node's extern steps in SlurmdSpoolDir, checks their owner and sends
// REQUEST_ADD_EXTERN_PID for the process doing the PAM account check (sshd's, here
// a small python3 PAM client: pamtester would exit at once). The adopted process
// is listed by `scontrol listpids` in the job's extern step and dies with the job;
// a user with no job on the node is refused. Each step is compared with the stock
// slurmd of the same release in the same run.
//
// Configuration: batchOptions (proctrack/cgroup, so that an adopted process is in
// the step's container on stock too) plus PrologFlags=Contain. The PAM service file
// lives in the cluster directory (pam_start_confdir) and is named sshd, the only
// service the module adopts for by default; it names the module by its path in the
// release's root and nodename=<node> (several nodes share this host).
//
// Wall time: about 6 s on 22.05 and on 24.11 (two clusters started at once, one job each).
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// externRunTimeout bounds each wait of the extern test on a loaded machine.
const externRunTimeout = 90 * time.Second

// pamClient calls pam_acct_mgmt for a service file in a private directory, as
// sshd does before a login: argv confdir service user outfile. It writes its pid,
// the PAM result, the module's messages to the user and SLURM_JOB_ID from the PAM
// environment to outfile, then, if let in, becomes a long-lived "login" (exec
// sleep keeps the adopted pid).
const pamClient = `import ctypes, os, sys
confdir, service, user, out = sys.argv[1:5]
# Global, as in sshd: the module takes pam_syslog and friends from libpam.
pam = ctypes.CDLL("libpam.so.0", mode=ctypes.RTLD_GLOBAL)
libc = ctypes.CDLL("libc.so.6")
libc.calloc.restype = ctypes.c_void_p
class Msg(ctypes.Structure):
    _fields_ = [("style", ctypes.c_int), ("msg", ctypes.c_char_p)]
class Resp(ctypes.Structure):
    _fields_ = [("resp", ctypes.c_char_p), ("retcode", ctypes.c_int)]
CONV = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(Msg)),
                        ctypes.POINTER(ctypes.POINTER(Resp)), ctypes.c_void_p)
class Conv(ctypes.Structure):
    _fields_ = [("conv", CONV), ("appdata", ctypes.c_void_p)]
said = []
def conv(n, msgs, resp, data):
    for i in range(n):
        said.append(msgs[i].contents.msg.decode())
    resp[0] = ctypes.cast(libc.calloc(n, ctypes.sizeof(Resp)), ctypes.POINTER(Resp))
    return 0
cb = CONV(conv)
c = Conv(cb, None)
h = ctypes.c_void_p()
pam.pam_start_confdir.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Conv), ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
pam.pam_acct_mgmt.argtypes = [ctypes.c_void_p, ctypes.c_int]
pam.pam_strerror.argtypes = [ctypes.c_void_p, ctypes.c_int]
pam.pam_strerror.restype = ctypes.c_char_p
pam.pam_getenv.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
pam.pam_getenv.restype = ctypes.c_char_p
pam.pam_end.argtypes = [ctypes.c_void_p, ctypes.c_int]
rc = pam.pam_start_confdir(service.encode(), user.encode(), ctypes.byref(c), confdir.encode(), ctypes.byref(h))
if rc != 0:
    sys.exit("pam_start_confdir: %d" % rc)
rc = pam.pam_acct_mgmt(h, 0)
lines = ["pid=%d" % os.getpid(), "acct_mgmt=%d %s" % (rc, pam.pam_strerror(h, rc).decode())]
lines += ["message=" + m for m in said]
job = pam.pam_getenv(h, b"SLURM_JOB_ID")
lines.append("SLURM_JOB_ID=" + (job.decode() if job else ""))
pam.pam_end(h, rc)
with open(out + ".tmp", "w") as f:
    f.write("\n".join(lines) + "\n")
os.rename(out + ".tmp", out)
if rc == 0:
    os.execv("/bin/sleep", ["sleep", "300"])
`

func externOptions(impl string) cluster.Options {
	o := batchOptions(impl)
	o.ExtraConf = append(o.ExtraConf, "PrologFlags=Contain")
	return o
}

// pamModule is pam_slurm_adopt.so's path in the cluster's root (Debian 12 puts it
// in /lib/security, trixie and sid in the multiarch directory).
func pamModule(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/security", "/lib/x86_64-linux-gnu/security", "/lib/security", "/usr/lib/security"} {
		p = filepath.Join(p, "pam_slurm_adopt.so")
		if _, err := os.Stat(filepath.Join(c.Root, p)); err == nil {
			return p
		}
	}
	t.Fatalf("pam_slurm_adopt.so not installed in %q: run make deps (libpam-slurm-adopt)", c.Root)
	return ""
}

// externRun is what one cluster showed, normalized.
type externRun struct {
	during   []string // listpids rows of the job while the login is adopted
	sstat    string   // sstat of the job's extern step
	adopted  []string // the login's PAM result
	refused  []string // a user without a job on the node
	ended    string   // how the adopted login ended
	after    []string // listpids rows of the job once it is gone
	loginPID int
}

func TestExternStep(t *testing.T) {
	p := startPair(t, externOptions)
	var ref, sut *externRun
	concurrently(t,
		subtest{p.label(p.ref), func(t *testing.T) { ref = externAdopt(t, p.ref) }},
		subtest{p.label(p.sut), func(t *testing.T) { sut = externAdopt(t, p.sut) }},
	)
	if ref == nil || sut == nil {
		t.Fatal("a cluster did not finish its run")
	}
	for _, cmp := range []struct {
		what     string
		ref, sut any
	}{
		{"the adopted login's PAM result", ref.adopted, sut.adopted},
		{"the refused user's PAM result", ref.refused, sut.refused},
		{"listpids of the job with the adopted login", ref.during, sut.during},
		{"sstat of the extern step", ref.sstat, sut.sstat},
		{"how the adopted login ended", ref.ended, sut.ended},
		{"listpids of the job after its end", ref.after, sut.after},
	} {
		if fmt.Sprint(cmp.ref) != fmt.Sprint(cmp.sut) {
			t.Errorf("%s differs:\nreference:  %q\nunder test: %q", cmp.what, cmp.ref, cmp.sut)
		}
	}
}

// externAdopt runs one cluster's part: a job of TestUser on the first node, a
// login of TestUser adopted into it, one of nobody refused, then scancel.
func externAdopt(t *testing.T, c *cluster.Cluster) *externRun {
	n := node(c, 0)
	dir := filepath.Join(c.Dir, "pam")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "pam_client.py")
	service := fmt.Sprintf("account required %s nodename=%s log_level=debug\n", pamModule(t, c), n)
	if err := os.WriteFile(script, []byte(pamClient), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sshd"), []byte(service), 0o644); err != nil {
		t.Fatal(err)
	}

	job := c.Sbatch(t, cluster.TestUser, "#!/bin/sh\nexec sleep 300\n", "-w", n, "-N1", "-t", "5")
	c.WaitJob(t, job, externRunTimeout, "RUNNING")
	norm := normalizer(c, map[string]string{job: "JOB", n: "NODE"})
	run := &externRun{}
	// The extern step is up before the batch step (its REQUEST_LAUNCH_PROLOG
	// comes first), and listed with its container's sleep.
	c.WaitFor(t, "the job's extern step in listpids", externRunTimeout, func() (bool, string) {
		rows := jobPIDRows(t, c, n, job)
		return slices.ContainsFunc(rows, func(r []string) bool { return r[2] == "extern" }), fmt.Sprint(rows)
	})

	out := filepath.Join(dir, "login.out")
	login, err := c.StartClient(t, cluster.BgCmd{
		Cmd:     cluster.Cmd{Args: []string{"python3", script, dir, "sshd", cluster.TestUser, out}},
		Timeout: 4 * time.Minute,
	})
	if err != nil {
		t.Fatalf("start the PAM client: %v", err)
	}
	t.Cleanup(login.Kill)
	got := strings.Split(strings.TrimSpace(waitFileContains(t, c, out, "SLURM_JOB_ID=", externRunTimeout)), "\n")
	if len(got) < 3 || !strings.HasPrefix(got[0], "pid=") {
		t.Fatalf("PAM client wrote %q; stderr %q", got, login.Stderr())
	}
	run.loginPID = cluster.Atoi(t, "login pid", strings.TrimPrefix(got[0], "pid="))
	for _, l := range got[1:] {
		run.adopted = append(run.adopted, norm(l))
	}
	if want := "SLURM_JOB_ID=" + job; got[len(got)-1] != want {
		t.Errorf("the login was not adopted into job %s: %q (PAM client stderr %q)", job, got, login.Stderr())
	}

	// Adopted: listed in the job's extern step, with the container's sleep.
	rows := jobPIDRows(t, c, n, job)
	found := false
	for _, r := range rows {
		pid := r[0]
		switch {
		case pid == fmt.Sprint(run.loginPID):
			found = r[2] == "extern"
			pid = "LOGIN"
		case strings.HasPrefix(procCmdline(pid), "sleep 100000000"):
			pid = "HOLDER"
		default:
			pid = "OTHER"
		}
		run.during = append(run.during, norm(strings.Join(append([]string{pid}, r[1:]...), " ")))
	}
	slices.Sort(run.during)
	run.during = slices.Compact(run.during)
	if !found {
		t.Errorf("adopted login %d is not in the job's extern step: %q", run.loginPID, rows)
	}

	// sstat reaches the extern step's manager through the node daemon.
	sout, serr, err := c.Exec(t, cluster.Cmd{User: cluster.TestUser, Args: []string{"sstat", "-P", "-n", "-j", job + ".extern", "-o", "JobID,NTasks"}, CleanEnv: true})
	run.sstat = norm(fmt.Sprintf("%q %q exit=%v", strings.TrimSpace(sout), strings.TrimSpace(serr), err != nil))

	// A user with no job on the node is refused.
	refusedOut := filepath.Join(dir, "refused.out")
	if _, errOut, err := c.Run(t, "", "python3", script, dir, "sshd", "nobody", refusedOut); err != nil {
		t.Errorf("PAM client for nobody: %v: %s", err, errOut)
	}
	if s, ok := readJobFile(t, refusedOut); ok {
		for _, l := range strings.Split(strings.TrimSpace(s), "\n")[1:] {
			run.refused = append(run.refused, norm(l))
		}
	}
	if len(run.refused) == 0 || run.refused[0] == "acct_mgmt=0 Success" {
		t.Errorf("nobody, who has no job on %s, was let in: %q", n, run.refused)
	}

	// The job's end kills the adopted login.
	c.MustRun(t, "", "scancel", job)
	r, ok := login.WaitTimeout(externRunTimeout)
	if !ok {
		t.Fatalf("adopted login %d outlived job %s by %s", run.loginPID, job, externRunTimeout)
	}
	run.ended = fmt.Sprintf("exit=%d signal=%v", r.ExitCode, r.Signal)
	if r.Signal == 0 {
		t.Errorf("adopted login ended by itself, not killed with the job: %s", run.ended)
	}
	c.WaitFor(t, "the job's steps gone from listpids", externRunTimeout, func() (bool, string) {
		rows := jobPIDRows(t, c, n, job)
		return len(rows) == 0, fmt.Sprint(rows)
	})
	if err := syscall.Kill(run.loginPID, 0); err == nil {
		t.Errorf("adopted login %d still exists after the job", run.loginPID)
	}
	run.after = []string{}
	return run
}

// jobPIDRows are the `scontrol listpids <job> <node>` rows of job (PID JOBID
// STEPID LOCALID GLOBALID).
func jobPIDRows(t *testing.T, c *cluster.Cluster, n, job string) [][]string {
	t.Helper()
	out, _, _ := c.Run(t, "", "scontrol", "listpids", job, n)
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[1] == job {
			rows = append(rows, f)
		}
	}
	return rows
}

// procCmdline is /proc/<pid>/cmdline with spaces ("" if gone).
func procCmdline(pid string) string {
	b, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
