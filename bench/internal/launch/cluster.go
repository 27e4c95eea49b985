package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Named timeouts and paths.
const (
	mungedStartTimeout = 20 * time.Second
	ctldStartTimeout   = 60 * time.Second
	registerTimeout    = 60 * time.Second
	limitStartTimeout  = 20 * time.Second
	clientCmdTimeout   = 30 * time.Second
	clientWaitDelay    = 2 * time.Second
	pollInterval       = 200 * time.Millisecond

	StockSlurmd    = "/usr/sbin/slurmd"
	StockSlurmctld = "/usr/sbin/slurmctld"
	Munged         = "/usr/sbin/munged"
	MungeKey       = "/etc/munge/munge.key"

	// MessageTimeout is slurm.conf's MessageTimeout in the bench cluster: Slurm's default.
	// Both daemons close a connection that has not delivered its request by then.
	MessageTimeout = 10 * time.Second

	// JobsPerCore is how many jobs may share a core in the per-daemon partitions
	// (OverSubscribe=FORCE:JobsPerCore), the same for every daemon.
	JobsPerCore = 8
)

// Ports are drawn below the ephemeral range and clear of the integration harness's range
// (20000-27800) and the engineers' private clusters (17817-17900, 27817-27900).
const (
	portLow  = 28000
	portHigh = 32000
)

// Impl is a node daemon implementation.
type Impl string

// Implementations.
const (
	ImplStock Impl = "stock" // Debian's /usr/sbin/slurmd 22.05
	ImplGo    Impl = "go"    // bin/slurmd-go
)

// NodeSpec describes one node daemon to run.
type NodeSpec struct {
	Name string   // NodeName, also its partition's name
	Impl Impl     //
	Env  []string // extra environment (e.g. TIEE_RPC_SERVER=net)
}

// Options configure Start.
type Options struct {
	Dir           string // working directory (created); slurm.conf, logs, spool, munged
	SlurmdGo      string // path of bin/slurmd-go
	Nodes         []NodeSpec
	MungedThreads int    // munged --num-threads; 0: munged's default (2)
	SlurmdDebug   string // SlurmdDebug for every node (same level for both implementations)
	Log           func(format string, args ...any)
}

// Node is a running node daemon.
type Node struct {
	NodeSpec
	Port int
	Proc *Proc
}

// Addr is the node's RPC address.
func (n *Node) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

// Cluster is a running private cluster: munged, slurmctld and the node daemons.
type Cluster struct {
	Dir         string
	ConfPath    string
	Name        string
	CtldPort    int
	MungeSocket string
	Munged      *Proc
	Ctld        *Proc
	Nodes       []*Node
	HWLine      string // `slurmd -C` node attributes

	opts  Options
	sp    *spawn.Spawner
	procs []*Proc // in start order; stopped in reverse
}

// Start brings the cluster up and waits until every node is idle. On error everything
// started so far is stopped.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.SlurmdDebug == "" {
		o.SlurmdDebug = "info"
	}
	for _, b := range []string{StockSlurmd, StockSlurmctld, Munged, o.SlurmdGo} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("launch: %s: %w (run make deps / make build)", b, err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c = &Cluster{Dir: o.Dir, ConfPath: filepath.Join(o.Dir, "slurm.conf"), opts: o, sp: spawn.New()}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	if err := c.startMunged(ctx); err != nil {
		return c, err
	}
	hw, err := exec.Command(StockSlurmd, "-C").Output()
	if err != nil {
		return c, fmt.Errorf("launch: slurmd -C: %w", err)
	}
	c.HWLine = hwAttrs(string(hw))
	ports, err := pickPorts(len(o.Nodes) + 2)
	if err != nil {
		return c, err
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	c.Name = "tb" + hex.EncodeToString(suffix)
	c.CtldPort = ports[0]
	for i, s := range o.Nodes {
		c.Nodes = append(c.Nodes, &Node{NodeSpec: s, Port: ports[i+2]})
	}
	for _, d := range []string{"state", "spool"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return c, err
		}
	}
	if err := os.WriteFile(c.ConfPath, []byte(c.renderConf(ports[1])), 0o644); err != nil {
		return c, err
	}
	c.Ctld, err = startProc(c.sp, "slurmctld", filepath.Join(o.Dir, "slurmctld.out"), c.Env(), nil,
		StockSlurmctld, "-D", "-f", c.ConfPath)
	if err != nil {
		return c, err
	}
	c.procs = append(c.procs, c.Ctld)
	if err := c.waitFor(ctx, "slurmctld answers scontrol ping", ctldStartTimeout, func() (bool, string) {
		out, _ := c.Run(ctx, "scontrol", "ping")
		return strings.Contains(out, "is UP"), out
	}, c.Ctld); err != nil {
		return c, err
	}
	for _, n := range c.Nodes {
		bin := StockSlurmd
		if n.Impl == ImplGo {
			bin = o.SlurmdGo
		}
		env := append(c.Env(), n.Env...)
		n.Proc, err = startProc(c.sp, n.Name, filepath.Join(o.Dir, n.Name+".out"), env, nil,
			bin, "-D", "-N", n.Name, "-f", c.ConfPath)
		if err != nil {
			return c, err
		}
		c.procs = append(c.procs, n.Proc)
	}
	for _, n := range c.Nodes {
		if err := c.waitFor(ctx, "node "+n.Name+" idle", registerTimeout, func() (bool, string) {
			out, _ := c.Run(ctx, "sinfo", "-h", "-N", "-n", n.Name, "-p", c.Partition(n.Name), "-o", "%t")
			return strings.TrimSpace(out) == "idle", out
		}, n.Proc); err != nil {
			return c, err
		}
	}
	return c, nil
}

// hwAttrs keeps the hardware attributes of `slurmd -C`'s first line (not NodeName, not UpTime).
func hwAttrs(out string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	var keep []string
	for _, f := range strings.Fields(line) {
		k, _, _ := strings.Cut(f, "=")
		switch k {
		case "CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory":
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

func (c *Cluster) renderConf(slurmdPort int) string {
	lines := []string{
		"# generated by bench/internal/launch; do not edit",
		"ClusterName=" + c.Name,
		"SlurmctldHost=localhost(127.0.0.1)",
		fmt.Sprintf("SlurmctldPort=%d", c.CtldPort),
		fmt.Sprintf("SlurmdPort=%d", slurmdPort),
		"AuthType=auth/munge",
		"AuthInfo=socket=" + c.MungeSocket,
		"CredType=cred/munge",
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
		"SlurmdTimeout=300",
		"SlurmctldTimeout=120",
		fmt.Sprintf("MessageTimeout=%d", int(MessageTimeout/time.Second)),
		"ReturnToService=2",
		"KillWait=5",
		"InactiveLimit=0",
		"MinJobAge=600", // job-throughput checks every task's final state after the array
		// Job scenarios measure the node daemons, not slurmctld's pacing: schedule at once when
		// a job ends (default batch_sched_delay: 3 s), and give a job a small default memory so
		// that CR_Core_Memory does not hand each job the whole node (one job at a time).
		"SchedulerParameters=batch_sched_delay=0",
		"DefMemPerCPU=64",
		"StateSaveLocation=" + c.Dir + "/state",
		"SlurmdSpoolDir=" + c.Dir + "/spool/%n",
		"SlurmdPidFile=" + c.Dir + "/%n.pid",
		"SlurmdLogFile=" + c.Dir + "/%n.log",
		"SlurmctldPidFile=" + c.Dir + "/slurmctld.pid",
		"SlurmctldLogFile=" + c.Dir + "/slurmctld.log",
		"SlurmctldDebug=info",
		"SlurmdDebug=" + c.opts.SlurmdDebug,
	}
	var names []string
	for _, n := range c.Nodes {
		lines = append(lines, fmt.Sprintf("NodeName=%s NodeAddr=127.0.0.1 NodeHostname=localhost Port=%d %s State=UNKNOWN",
			n.Name, n.Port, c.HWLine))
		names = append(names, n.Name)
	}
	lines = append(lines, "PartitionName=all Nodes="+strings.Join(names, ",")+" Default=YES MaxTime=INFINITE State=UP")
	// One partition per node daemon, named after it, so that a job scenario can aim at one
	// implementation with -p <node>. Up to JobsPerCore jobs share a core there: slurmctld
	// starts queued jobs about once a second per free slot, so with one job per core a job
	// array of `true` measures that pacing rather than the node daemons.
	for _, n := range c.Nodes {
		lines = append(lines, fmt.Sprintf("PartitionName=p%s Nodes=%s MaxTime=INFINITE State=UP OverSubscribe=FORCE:%d", n.Name, n.Name, JobsPerCore))
	}
	return strings.Join(lines, "\n") + "\n"
}

// Partition is the partition that holds only node name.
func (c *Cluster) Partition(name string) string { return "p" + name }

// Env is the environment for daemons and clients of this cluster: the bench's own, without
// any SLURM* variable, plus SLURM_CONF.
func (c *Cluster) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM") {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+c.ConfPath)
}

// Run runs a Slurm client command (sinfo, scontrol, sbatch, srun …) against the cluster,
// bounded by clientCmdTimeout, and returns its combined output.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	return c.RunFor(ctx, clientCmdTimeout, name, args...)
}

// RunFor is Run bounded by limit instead: past it the command is killed and the error wraps
// context.DeadlineExceeded. Output pipes still held by the command's children are closed
// clientWaitDelay after it exits, so a stray child cannot stretch the call.
func (c *Cluster) RunFor(ctx context.Context, limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	cmd.WaitDelay = clientWaitDelay
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v, limit %v)", ctx.Err(), err, limit)
	}
	return string(out), err
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Cluster) waitFor(ctx context.Context, what string, limit time.Duration, cond func() (bool, string), p *Proc) error {
	deadline := time.Now().Add(limit)
	for {
		ok, last := cond()
		if ok {
			return nil
		}
		if p != nil && p.Exited() {
			return fmt.Errorf("launch: waiting for %s: %s (see %s)", what, p.Status(), c.Dir)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("launch: %s: not after %v (last: %q; see %s)", what, limit, last, c.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// startMunged runs a private munged (same key as the system one, own socket) as user munge,
// so the bench neither disturbs nor is disturbed by other users of the system munged, and its
// thread count is known.
func (c *Cluster) startMunged(ctx context.Context) error {
	u, err := user.Lookup("munge")
	if err != nil {
		return fmt.Errorf("launch: user munge: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := filepath.Join(c.Dir, "munge")
	// munged insists that its directories belong to it and are not writable by others.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	c.MungeSocket = filepath.Join(dir, "munge.socket")
	args := []string{Munged, "-F", "--socket=" + c.MungeSocket, "--pid-file=" + filepath.Join(dir, "munged.pid"),
		"--log-file=" + filepath.Join(dir, "munged.log"), "--seed-file=" + filepath.Join(dir, "munged.seed"),
		"--key-file=" + MungeKey}
	if c.opts.MungedThreads > 0 {
		args = append(args, fmt.Sprintf("--num-threads=%d", c.opts.MungedThreads))
	}
	c.Munged, err = startProc(c.sp, "munged", filepath.Join(c.Dir, "munged.out"), os.Environ(), func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, c.Munged)
	return c.waitFor(ctx, "munged socket", mungedStartTimeout, func() (bool, string) {
		conn, err := net.DialTimeout("unix", c.MungeSocket, time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	}, c.Munged)
}

// StartLimitServer starts bin limitsrv in mode on a free port with a stats port, and waits
// for its "ready" line.
func (c *Cluster) StartLimitServer(ctx context.Context, bin, mode string) (p *Proc, addr, statsAddr string, err error) {
	ports, err := pickPorts(2)
	if err != nil {
		return nil, "", "", err
	}
	addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	statsAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	out := filepath.Join(c.Dir, "limitsrv-"+mode+".out")
	p, err = startProc(c.sp, "limitsrv-"+mode, out, c.Env(), nil,
		bin, "-mode", mode, "-listen", addr, "-stats", statsAddr, "-munge-socket", c.MungeSocket)
	if err != nil {
		return nil, "", "", err
	}
	c.procs = append(c.procs, p)
	err = c.waitFor(ctx, "limitsrv "+mode+" ready", limitStartTimeout, func() (bool, string) {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "ready "), string(b)
	}, p)
	return p, addr, statsAddr, err
}

// Stop stops everything this cluster started, newest first. Idempotent.
func (c *Cluster) Stop() []error {
	var errs []error
	// Node daemons and limit servers first, all at once; then slurmctld; munged last.
	var rest []*Proc
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p == c.Ctld || p == c.Munged {
			continue
		}
		_ = syscall.Kill(p.PID(), syscall.SIGTERM)
		rest = append(rest, p)
	}
	for _, p := range rest {
		if err := p.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []*Proc{c.Ctld, c.Munged} {
		if p != nil {
			if err := p.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	c.procs = nil
	if c.sp != nil {
		c.sp.Close()
		c.sp = nil
	}
	return errs
}

// pickPorts returns n distinct free TCP ports in [portLow, portHigh).
func pickPorts(n int) ([]int, error) { return spawn.FreePorts(n, portLow, portHigh) }

// LogTail returns the last n lines of a file (for error reports).
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
