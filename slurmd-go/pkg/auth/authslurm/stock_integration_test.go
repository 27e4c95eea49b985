//go:build integration

package authslurm_test

// Real Slurm 24.11 / 26.05 daemons and clients for the interop tests, run
// from the chroots scripts/chroots.sh builds. Each daemon and client runs
// in its own private mount namespace with the chroot's /run/slurm and
// /run/slurmctld bind-mounted from this test's directories: SACK sockets
// live there, and other clusters on the host must neither see ours nor
// lend theirs.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
)

const chrootBase = "/var/lib/tiee/chroots"

// Named timeouts: every wait below is on state, bounded by one of these.
const (
	daemonUp    = 90 * time.Second // slurmctld listening, node idle (a loaded 2-core host)
	clientRun   = 90 * time.Second // one client command
	daemonStop  = 20 * time.Second // SIGTERM to exit
	pollEvery   = 200 * time.Millisecond
	rpcDeadline = 30 * time.Second // one hand-framed RPC
)

type release struct {
	name    string // "24.11"
	version uint16 // its SLURM_PROTOCOL_VERSION
}

var releases = []release{{"24.11", authslurm.Version2411}, {"26.05", authslurm.Version2605}}

func (r release) root(t *testing.T) string {
	t.Helper()
	root := filepath.Join(chrootBase, r.name)
	if _, err := os.Stat(filepath.Join(root, ".tiee-ready")); err != nil {
		t.Fatalf("no Slurm %s chroot at %s (run scripts/chroots.sh %s): %v", r.name, root, r.name, err)
	}
	if _, err := os.Stat(filepath.Join(root, "proc", "self")); err != nil {
		t.Fatalf("Slurm %s chroot not mounted (run scripts/chroots.sh %s): %v", r.name, r.name, err)
	}
	for _, d := range []string{"run/slurm", "run/slurmctld"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// freePorts returns n TCP ports free on 127.0.0.1, from this branch's
// range for hand-started daemons.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for p := 28600; p < 29000 && len(ports) < n; p++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("only %d free ports in 28600-28999", len(ports))
	}
	return ports
}

// stockCluster is a real slurmctld (and optionally one stock slurmd, node
// n1) of one release with AuthType=auth/slurm.
type stockCluster struct {
	t          *testing.T
	rel        release
	root       string
	dir        string // slurm.conf, slurm.key, logs, state
	name       string // ClusterName
	ctldPort   int
	slurmdPort int
	procs      []*exec.Cmd
	sackDir    string // bound at /run/slurm for clients (runClient)
	emptyDir   string
}

func newStockCluster(t *testing.T, rel release, withSlurmd bool, authInfo string) *stockCluster {
	t.Helper()
	root := rel.root(t)
	dir, err := os.MkdirTemp("/tmp", "auth-it-")
	if err != nil {
		t.Fatal(err)
	}
	// Clients run as nobody too: they read slurm.conf here.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	c := &stockCluster{t: t, rel: rel, root: root, dir: dir, ctldPort: ports[0], slurmdPort: ports[1],
		name: "auth" + strings.ReplaceAll(rel.name, ".", ""), sackDir: filepath.Join(dir, "client-run-slurm"),
		emptyDir: filepath.Join(dir, "empty")}
	for _, d := range []string{"state", "spool/n1", "ctld-run-slurm", "ctld-run-slurmctld", "slurmd-run-slurm", "slurmd-run-slurmctld", "client-run-slurm", "empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyPath(), key, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := []string{
		"ClusterName=" + c.name,
		"SlurmctldHost=localhost(127.0.0.1)",
		fmt.Sprintf("SlurmctldPort=%d", c.ctldPort),
		fmt.Sprintf("SlurmdPort=%d", c.slurmdPort),
		"AuthType=auth/slurm",
		"CredType=cred/slurm",
		"SlurmUser=root",
		"SlurmdUser=root",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_Core_Memory",
		"ProctrackType=proctrack/pgid",
		"TaskPlugin=task/none",
		"JobAcctGatherType=jobacct_gather/none",
		"AccountingStorageType=accounting_storage/none",
		"JobCompType=jobcomp/none",
		"SwitchType=switch/none",
		"MpiDefault=none",
		"SlurmdTimeout=60",
		"MessageTimeout=20",
		"ReturnToService=2",
		"StateSaveLocation=" + dir + "/state",
		"SlurmdSpoolDir=" + dir + "/spool/%n",
		"SlurmdPidFile=" + dir + "/%n.pid",
		"SlurmdLogFile=" + dir + "/%n.log",
		"SlurmctldPidFile=" + dir + "/slurmctld.pid",
		"SlurmctldLogFile=" + dir + "/slurmctld.log",
		"SlurmctldDebug=debug",
		"SlurmdDebug=debug2", // "Finish processing RPC" ends every request
		fmt.Sprintf("NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=localhost Port=%d CPUs=2 RealMemory=500 State=UNKNOWN", c.slurmdPort),
		"PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
	}
	if authInfo != "" {
		lines = append(lines, "AuthInfo="+authInfo)
	}
	conf := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(c.confPath(), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.conf"), []byte("CgroupPlugin=disabled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	c.startDaemon("slurmctld", "ctld", "/usr/sbin/slurmctld", "-D", "-i", "-f", c.confPath())
	c.waitPort(c.ctldPort)
	if withSlurmd {
		c.startDaemon("slurmd", "slurmd", "/usr/sbin/slurmd", "-D", "-N", "n1", "-f", c.confPath())
		c.waitPort(c.slurmdPort)
	}
	return c
}

func (c *stockCluster) confPath() string { return filepath.Join(c.dir, "slurm.conf") }
func (c *stockCluster) keyPath() string  { return filepath.Join(c.dir, "slurm.key") }

// nsScript binds runSlurm and runSlurmctld over the chroot's and execs the
// command inside the chroot.
const nsScript = `set -e; mount --bind "$1" "$3/run/slurm"; mount --bind "$2" "$3/run/slurmctld"; shift 3; exec "$@"`

func (c *stockCluster) nsCommand(ctx context.Context, runSlurm, runSlurmctld string, argv ...string) *exec.Cmd {
	args := append([]string{"-m", "--propagation", "private", "sh", "-c", nsScript, "sh", runSlurm, runSlurmctld, c.root}, argv...)
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

func (c *stockCluster) startDaemon(name, prefix string, argv ...string) {
	c.t.Helper()
	out, err := os.Create(filepath.Join(c.dir, name+".out"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := c.nsCommand(context.Background(), filepath.Join(c.dir, prefix+"-run-slurm"), filepath.Join(c.dir, prefix+"-run-slurmctld"),
		append([]string{"chroot", c.root}, argv...)...)
	cmd.Stdout, cmd.Stderr = out, out
	// A test binary killed by go test's timeout runs no Cleanup: the
	// daemon then gets SIGTERM from the kernel instead.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.procs = append(c.procs, cmd)
	c.t.Logf("%s %s: pid %d, log in %s", c.rel.name, name, cmd.Process.Pid, c.dir)
}

// stop sends SIGTERM to each daemon (by pid: unshare, sh and chroot exec
// into it) and waits for it; SIGKILL past daemonStop.
func (c *stockCluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(daemonStop):
			_ = p.Process.Kill()
			<-done
		}
	}
	c.procs = nil
	if c.t.Failed() {
		c.t.Logf("left %s for inspection", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

func (c *stockCluster) waitPort(port int) {
	c.t.Helper()
	waitFor(c.t, daemonUp, fmt.Sprintf("port %d listening", port), func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// runClient runs a client command of the cluster's release, as uid/gid
// (nil: root), with the test's SACK directory at /run/slurm and nothing at
// /run/slurmctld, and returns its output and error.
func (c *stockCluster) runClient(user *[2]int, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clientRun)
	defer cancel()
	args := []string{"chroot"}
	if user != nil {
		args = append(args, fmt.Sprintf("--userspec=%d:%d", user[0], user[1]))
	}
	args = append(args, c.root, "env", "SLURM_CONF="+c.confPath())
	cmd := c.nsCommand(ctx, c.sackDir, c.emptyDir, append(args, argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// waitFor polls cond every pollEvery until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(pollEvery)
	}
}

// logSince returns what a daemon's log file got past offset.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
