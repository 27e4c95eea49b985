package cluster

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// StartNodeWith is StartNode with another daemon binary and extra arguments after
// Options.DaemonArgs (e.g. "-c"): an upgrade or a clean start of a static node. It
// does not wait for registration. Test goroutine only.
func (c *Cluster) StartNodeWith(t testing.TB, name, bin string, extra ...string) {
	t.Helper()
	if !c.isStatic(name) {
		t.Fatalf("cluster: %s is not a static node of %s (have %v)", name, c.Name, c.NodeNames())
	}
	args := append([]string{bin, "-D", "-N", name, "-f", c.ConfPath}, c.opts.DaemonArgs...)
	c.startNodeProc(t, name, append(args, extra...))
}

// StartNodeConfigless starts static node name's daemon without -f, taking
// its configuration from slurmctld (--conf-server localhost:CtldPort).
// (24.11's stock slurmd, given -f as well, joins the two paths when a
// reconfigure restarts it.) It does not wait for registration. Test
// goroutine only.
func (c *Cluster) StartNodeConfigless(t testing.TB, name string) {
	t.Helper()
	if !c.isStatic(name) {
		t.Fatalf("cluster: %s is not a static node of %s (have %v)", name, c.Name, c.NodeNames())
	}
	host := "localhost"
	if c.zn != nil {
		host = c.zn.ctldAddr() // the node's own namespace has its own loopback
	}
	server := net.JoinHostPort(host, strconv.Itoa(c.CtldPort))
	args := append([]string{c.SlurmdBin, "-D", "-N", name, "--conf-server", server}, c.opts.DaemonArgs...)
	c.startNodeProc(t, name, args)
}

// UpgradedDaemon is the node daemon as an upgrade would install it: for Impl "go"
// a copy of SlurmdBin and the slurmstepd-go beside it in a new directory (removed
// when t ends), so the restarted daemon runs, and finds its step manager, at
// another path; for the stock daemon its own path (Debian upgrades in place).
// Test goroutine only.
func (c *Cluster) UpgradedDaemon(t testing.TB) string {
	t.Helper()
	if c.Impl != ImplGo {
		return c.SlurmdBin
	}
	// Not under Dir: a tmpfs cluster directory may be mounted noexec elsewhere.
	dir, err := os.MkdirTemp("", "ti-upgrade-")
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	src := filepath.Dir(c.SlurmdBin)
	for _, f := range []string{filepath.Base(c.SlurmdBin), "slurmstepd-go"} {
		if err := copyExecutable(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatalf("%v", err)
		}
	}
	return filepath.Join(dir, filepath.Base(c.SlurmdBin))
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("cluster: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("cluster: copy %s: %w", src, err)
	}
	return nil
}

// KillCtld sends sig to slurmctld and waits (daemonStopTimeout) until it has
// exited: an outage that StartCtld ends. Test goroutine only.
func (c *Cluster) KillCtld(t testing.TB, sig syscall.Signal) {
	t.Helper()
	c.mu.Lock()
	p := c.ctld
	c.mu.Unlock()
	if p == nil || p.exited() {
		t.Fatalf("cluster: KillCtld: slurmctld not running")
	}
	if err := p.signal(sig); err != nil {
		t.Fatalf("cluster: kill -%d %d (slurmctld): %v", sig, p.pid(), err)
	}
	if !p.wait(daemonStopTimeout) {
		t.Fatalf("cluster: slurmctld (pid %d) still running %v after signal %v", p.pid(), daemonStopTimeout, sig)
	}
}

// StartCtld starts slurmctld again after KillCtld (same slurm.conf and
// StateSaveLocation) and waits until it answers ping; not for the nodes.
// Test goroutine only.
func (c *Cluster) StartCtld(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	p := c.ctld
	c.mu.Unlock()
	if p != nil && !p.exited() {
		t.Fatalf("cluster: StartCtld: slurmctld already running (pid %d)", p.pid())
	}
	c.startCtld(t)
}
