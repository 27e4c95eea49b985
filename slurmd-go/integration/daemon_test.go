//go:build integration

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

const (
	takeOverTimeout = 30 * time.Second
	idleConns       = 300 // past stock slurmd's 256-thread cap
)

// TestDaemon_AdminLifecycle: what an admin does to a node daemon, on both
// implementations alike: SIGHUP re-reads slurm.conf; a second daemon for the
// same node (pid-file lock) stops the first and takes over, logging to -L;
// SIGTERM ends it cleanly and removes the pid file; the node stays usable.
func TestDaemon_AdminLifecycle(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	node := c.Nodes[0].Name
	pidFile := filepath.Join(c.Dir, node+".pid")

	t.Run("SIGHUP reconfigures", func(t *testing.T) {
		c.SetConf(t, "SlurmdDebug=debug")
		c.KillNode(t, node, syscall.SIGHUP)
		c.WaitFor(t, "Debug=5 after SIGHUP", reconfigureTimeout, func() (bool, string) {
			s, err := c.ShowSlurmdErr(t, "", node)
			if err != nil {
				return false, err.Error()
			}
			return s["Slurmd Debug"] == "5", fmt.Sprintf("Slurmd Debug=%s", s["Slurmd Debug"])
		})
		if !c.NodeRunning(node) {
			t.Fatal("SIGHUP stopped the daemon")
		}
	})

	var second *exec.Cmd
	secondLog := filepath.Join(c.Dir, node+"-second.log")
	outer := t
	t.Run("second daemon takes over", func(t *testing.T) {
		old := c.NodePID(node)
		var err error
		second, err = c.Command("", "/", c.SlurmdBin, "-D", "-N", node, "-f", c.ConfPath, "-L", secondLog)
		if err != nil {
			t.Fatal(err)
		}
		second.Env = append(os.Environ(), "SLURM_CONF="+c.ConfPath)
		second.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
		outer.Cleanup(func() { _ = second.Process.Kill() })
		c.WaitFor(t, "the first daemon to exit", takeOverTimeout, func() (bool, string) {
			return !c.NodeRunning(node), fmt.Sprintf("pid %d still running", old)
		})
		c.WaitFor(t, "the second daemon to serve", takeOverTimeout, func() (bool, string) {
			s, err := c.ShowSlurmdErr(t, "", node)
			if err != nil {
				return false, err.Error()
			}
			return s["Slurmd PID"] == strconv.Itoa(second.Process.Pid), "Slurmd PID=" + s["Slurmd PID"]
		})
		b, err := os.ReadFile(pidFile)
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(second.Process.Pid) {
			t.Fatalf("pid file holds %q (%v), want %d", b, err, second.Process.Pid)
		}
		if st, err := os.Stat(secondLog); err != nil || st.Size() == 0 {
			t.Fatalf("-L %s not written: %v", secondLog, err)
		}
		c.WaitNodes(t, "idle", []string{node}, nodeBackIdleTimeout)
	})

	t.Run("SIGTERM stops cleanly", func(t *testing.T) {
		if second == nil {
			t.Fatal("no second daemon")
		}
		_ = second.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- second.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v", err)
			}
		case <-time.After(takeOverTimeout):
			t.Fatal("daemon did not stop on SIGTERM")
		}
		if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("pid file left behind: %v", err)
		}
		c.StartNode(t, node)
		c.WaitNodes(t, "idle", []string{node}, nodeBackIdleTimeout)
	})
}

// TestDaemon_IdleConnectionsDoNotBlock holds more idle connections than the
// stock daemon has threads and asks the node's status meanwhile. slurmd-go
// must answer; the stock slurmd's accept loop waits for a free thread, and
// the time it took is logged for comparison (bench/ measures it properly).
func TestDaemon_IdleConnectionsDoNotBlock(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	node := c.Nodes[0]
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(node.Port))
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, cn := range conns {
			cn.Close()
		}
	})
	for i := 0; i < idleConns; i++ {
		cn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		mu.Lock()
		conns = append(conns, cn)
		mu.Unlock()
	}
	start := time.Now()
	s, err := c.ShowSlurmdErr(t, "", node.Name)
	took := time.Since(start)
	t.Logf("%s: scontrol show slurmd with %d idle connections held took %s", c.Impl, idleConns, took)
	if c.Impl == "go" {
		if err != nil {
			t.Fatalf("no answer with %d idle connections held: %v", idleConns, err)
		}
		if s["Slurmd PID"] != strconv.Itoa(c.NodePID(node.Name)) {
			t.Fatalf("answer from the wrong daemon: %v", s)
		}
		if took > c.MessageTimeout {
			t.Fatalf("answered after %s, past MessageTimeout %s", took, c.MessageTimeout)
		}
	}
}

// TestDaemon_PrintConfig: `-C` prints the same hardware line as the stock
// slurmd of the release (UpTime may tick between the two runs), both run where that
// release's daemons run.
func TestDaemon_PrintConfig(t *testing.T) {
	bin := os.Getenv(cluster.EnvSlurmdBin)
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "bin", "slurmd-go")
	}
	rel, err := cluster.SelectedRelease()
	if err != nil {
		t.Fatal(err)
	}
	output := func(argv ...string) []byte {
		t.Helper()
		cmd, err := rel.Command(argv...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s -C (Slurm %s): %v", argv[0], rel.Name, err)
		}
		return out
	}
	ours := output(bin, "-C")
	stock := output(cluster.StockSlurmd, "-C")
	first := func(b []byte) string { return strings.SplitN(string(b), "\n", 2)[0] }
	if first(ours) != first(stock) {
		t.Fatalf("-C differs:\n ours:  %s\n stock: %s", first(ours), first(stock))
	}
	if !strings.HasPrefix(strings.SplitN(string(ours), "\n", 3)[1], "UpTime=") {
		t.Fatalf("no UpTime line: %q", ours)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// TestDaemon_HealthCheckAndShutdown: slurmctld's REQUEST_HEALTH_CHECK runs
// HealthCheckProgram on every node (with the node's environment), and
// `scontrol shutdown` (REQUEST_SHUTDOWN to every node) stops every node
// daemon, as it stops stock slurmd.
func TestDaemon_HealthCheckAndShutdown(t *testing.T) {
	dir, err := os.MkdirTemp("", "hc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prog := filepath.Join(dir, "healthcheck.sh")
	// slurmd runs it as root with no Slurm variables; each run leaves a mark.
	script := "#!/bin/sh\ntouch " + dir + "/ran.$$\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, cluster.Options{Nodes: 2, ExtraConf: []string{
		"HealthCheckProgram=" + prog, "HealthCheckInterval=2",
	}})
	c.WaitFor(t, "HealthCheckProgram runs on both nodes", 30*time.Second, func() (bool, string) {
		marks, _ := filepath.Glob(filepath.Join(dir, "ran.*"))
		return len(marks) >= 2*len(c.Nodes), fmt.Sprintf("%d runs", len(marks))
	})
	c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)

	c.MustRun(t, "", "scontrol", "shutdown")
	c.WaitFor(t, "every node daemon to exit after scontrol shutdown", takeOverTimeout, func() (bool, string) {
		var running []string
		for _, n := range c.NodeNames() {
			if c.NodeRunning(n) {
				running = append(running, n)
			}
		}
		return len(running) == 0, "still running: " + strings.Join(running, ",")
	})
}
