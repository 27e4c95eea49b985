//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
)

// Named bounds of the GPU health test.
const (
	// gpuHealthTimeout: an injected fault reaches slurmctld as a drain (the
	// mock's event wait is 5 s), and a restarted daemon's first poll lifts
	// its own drain.
	gpuHealthTimeout = 60 * time.Second
	// mockFIFOTimeout: the nvmlmock daemon has made its control FIFO.
	mockFIFOTimeout = 30 * time.Second
)

// gpuReasonRe is the drain reason health sets for GPU 3's XID 79.
var gpuReasonRe = regexp.MustCompile(`^gpu: GPU 3 \([0-9A-Fa-f:.]+\): XID 79$`)

// TestGPUHealth: slurmd-go with the 8 x H100 mock (bin/slurmd-go-nvmlmock,
// AutoDetect=nvml). An application XID (13) drains nothing; a critical
// XID (79) on GPU 3 drains the node at slurmctld with a "gpu: GPU 3
// (<bus id>): XID 79" reason; a restarted daemon (the GPU reset) finds no
// fault and lifts that drain; a drain whose reason an administrator set
// stays through the next restart.
func TestGPUHealth(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "slurmd-go-nvmlmock")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make nvmlmock`)", bin, err)
	}
	t.Setenv(cluster.EnvSlurmdBin, bin)
	// Under /tmp: the release chroots share it with the host.
	dir, err := os.MkdirTemp("/tmp", "ti-gpuhealth-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fifo := filepath.Join(dir, "nvmlmock.ctl")
	c := cluster.Start(t, cluster.Options{
		Impl:      cluster.ImplGo,
		Nodes:     1,
		ExtraConf: []string{"GresTypes=gpu"},
		NodeExtra: "Gres=gpu:" + h100Type + ":8",
		GresConf:  []string{"AutoDetect=nvml"},
		DaemonEnv: []string{gpu.MockControlEnv + "=" + fifo},
	})
	n := node(c, 0)
	c.WaitNodes(t, "idle", []string{n}, dynamicNodeTimeout)

	mock := func(cmd string) {
		t.Helper()
		c.WaitFor(t, "the mock's control FIFO", mockFIFOTimeout, func() (bool, string) {
			st, err := os.Stat(fifo)
			return err == nil && st.Mode()&os.ModeNamedPipe != 0, fmt.Sprint(err)
		})
		// O_NONBLOCK: fails (ENXIO) instead of blocking while the daemon
		// has not opened its end yet.
		var f *os.File
		c.WaitFor(t, "the mock reading its FIFO", mockFIFOTimeout, func() (bool, string) {
			f, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			return err == nil, fmt.Sprint(err)
		})
		defer f.Close()
		if _, err := f.WriteString(cmd + "\n"); err != nil {
			t.Fatalf("mock %q: %v", cmd, err)
		}
	}
	state := func() (string, string) {
		out := c.MustRun(t, "root", "sinfo", "-h", "-N", "-n", n, "-o", "%T|%E")
		st, reason, _ := strings.Cut(strings.TrimSpace(out), "|")
		return st, reason
	}
	waitDrained := func(what string, ok func(reason string) bool) string {
		t.Helper()
		var reason string
		c.WaitFor(t, what, gpuHealthTimeout, func() (bool, string) {
			st, r := state()
			reason = r
			return strings.HasPrefix(st, "drain") && ok(r), st + " " + r
		})
		return reason
	}
	restart := func() {
		t.Helper()
		c.KillNode(t, n, syscall.SIGTERM)
		c.StartNode(t, n)
	}

	t.Run("XIDDrains", func(t *testing.T) {
		mock("xid 0 13") // an application XID: the program's fault, not the GPU's
		mock("xid 3 79") // fallen off the bus
		reason := waitDrained("the node drained for GPU 3's XID 79", func(r string) bool { return r != "none" && r != "" })
		t.Logf("drained: %q", reason)
		if !gpuReasonRe.MatchString(reason) {
			t.Errorf("drain reason %q, want one like %q (and nothing of GPU 0's XID 13)", reason, gpuReasonRe)
		}
	})
	t.Run("RestartClears", func(t *testing.T) {
		restart()
		c.WaitFor(t, "the restarted daemon lifting its own drain", gpuHealthTimeout, func() (bool, string) {
			st, r := state()
			return st == "idle", st + " " + r
		})
	})
	t.Run("AdminDrainStays", func(t *testing.T) {
		mock("xid 3 79")
		waitDrained("the node drained again", gpuReasonRe.MatchString)
		const admin = "admin: GPU 3 sent for RMA"
		c.MustRun(t, "root", "scontrol", "update", "NodeName="+n, "State=DRAIN", "Reason="+admin)
		restart()
		// The daemon's first poll finds no fault and would resume its
		// own drain: wait until it has logged that this one is not.
		c.WaitFor(t, "the restarted daemon leaving the admin's drain", gpuHealthTimeout, func() (bool, string) {
			b, _ := os.ReadFile(c.NodeLog(n))
			return strings.Contains(string(b), "is not the one GPU health set"), "no such log line yet"
		})
		st, r := state()
		t.Logf("after restart: %s %q", st, r)
		if !strings.HasPrefix(st, "drain") || r != admin {
			t.Errorf("after restart: state %q reason %q, want drained with %q", st, r, admin)
		}
	})
}
