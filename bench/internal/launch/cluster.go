package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
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

	// Paths of the stock binaries, on the host (22.05) or inside the release's chroot.
	StockSlurmd    = "/usr/sbin/slurmd"
	StockSlurmctld = "/usr/sbin/slurmctld"
	Munged         = "/usr/sbin/munged" // always the host's: one private munged serves either release
	MungeKey       = "/etc/munge/munge.key"
	// KeyFile is auth/slurm's key, beside slurm.conf, where slurmctld, slurmd and slurmd-go
	// look for it.
	KeyFile = "slurm.key"
	// KeyBytes is the size of the random slurm.key each auth/slurm cluster gets.
	KeyBytes = 1024

	// MessageTimeout is slurm.conf's MessageTimeout in the bench cluster: Slurm's default.
	// Both daemons close a connection that has not delivered its request by then.
	MessageTimeout = 10 * time.Second

	// JobsPerCore is how many jobs may share a core in the per-daemon partitions
	// (OverSubscribe=FORCE:JobsPerCore), the same for every daemon.
	JobsPerCore = 8
)

// Ports are drawn below the ephemeral range and clear of the integration harness's range
// (20000-27800), the engineers' private clusters (17817-17900, 27817-27900) and the ports
// other tests start real daemons on by hand (28000-32000: the auth/slurm interop tests
// take 28600-28999): 32000-32700 is the bench's own.
const (
	portLow  = 32000
	portHigh = 32700
)

// Impl is a node daemon implementation.
type Impl string

// Implementations.
const (
	ImplStock Impl = "stock" // Debian's /usr/sbin/slurmd of the stack's release
	ImplGo    Impl = "go"    // bin/slurmd-go
)

// NodeSpec describes one node daemon to run.
type NodeSpec struct {
	Name string   // NodeName, also its partition's name
	Impl Impl     //
	Env  []string // extra environment (e.g. TIEE_RPC_SERVER=net)
	// Of names the node daemon this one is an extra node of ("": none). A daemon and its
	// extra nodes form its multi-node partition (Nodeset); no single-node scenario aims at
	// an extra node.
	Of string
}

// Options configure Start.
type Options struct {
	Dir           string // working directory (created); slurm.conf, logs, spool, munged
	Stack         Stack  // release and auth type; the zero value is DefaultStack
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

// Cluster is a running private cluster: munged (auth/munge only), slurmctld and the node
// daemons.
//
// A chroot stack (24.11) runs every Slurm process, daemons and client commands alike, in the
// release's chroot, each in its own private mount namespace with its own directories bound
// over the chroot's /run/slurm and /run/slurmctld: auth/slurm daemons serve SACK at those
// fixed paths, so two node daemons (or another engineer's cluster) never share a socket.
// Client commands see an empty /run/slurm and slurmctld's /run/slurmctld, so every client
// token comes from slurmctld's SACK, the same for every node daemon under test; each node
// daemon's own step managers use its own SACK.
type Cluster struct {
	Dir         string
	ConfPath    string
	Name        string
	Stack       Stack
	CtldPort    int
	MungeSocket string // "" without munged
	KeyPath     string // auth/slurm: the cluster's slurm.key ("" with munge)
	Munged      *Proc  // nil without munged
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
	if o.Stack == (Stack{}) {
		o.Stack = DefaultStack
	}
	if _, err := ParseStack(o.Stack.Release, o.Stack.Auth); err != nil {
		return nil, err
	}
	if err := checkBinaries(o); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c = &Cluster{Dir: o.Dir, ConfPath: filepath.Join(o.Dir, "slurm.conf"), Stack: o.Stack, opts: o, sp: spawn.New()}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()
	if o.Stack.UsesMunged() {
		if err := c.startMunged(ctx); err != nil {
			return c, err
		}
	} else if err := c.writeKey(); err != nil {
		return c, err
	}
	hwArgv := c.argv("hw", nil, StockSlurmd, "-C")
	hw, err := exec.Command(hwArgv[0], hwArgv[1:]...).Output()
	if err != nil {
		return c, fmt.Errorf("launch: slurmd -C (%s): %w", o.Stack, err)
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
	if cg := c.renderCgroupConf(); cg != "" {
		if err := os.WriteFile(filepath.Join(o.Dir, "cgroup.conf"), []byte(cg), 0o644); err != nil {
			return c, err
		}
	}
	c.Ctld, err = startProc(c.sp, "slurmctld", filepath.Join(o.Dir, "slurmctld.out"), c.Env(), nil,
		c.argv("slurmctld", nil, StockSlurmctld, "-D", "-f", c.ConfPath)...)
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
			c.argv(n.Name, nil, bin, "-D", "-N", n.Name, "-f", c.ConfPath)...)
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

// clientCommands are the client commands the scenarios run; a chroot must have them all.
var clientCommands = []string{"/usr/bin/sinfo", "/usr/bin/scontrol", "/usr/bin/squeue", "/usr/bin/sbatch", "/usr/bin/srun", "/usr/bin/scancel"}

// checkBinaries says which binary the stack lacks, and how to get it.
func checkBinaries(o Options) error {
	host := []string{o.SlurmdGo}
	if o.Stack.UsesMunged() {
		host = append(host, Munged)
	}
	if o.Stack.Root() == "" {
		host = append(host, StockSlurmd, StockSlurmctld)
	} else if _, err := exec.LookPath("unshare"); err != nil {
		return fmt.Errorf("launch: unshare (util-linux) runs the %s daemons in private mount namespaces: %w", o.Stack.Release, err)
	}
	for _, b := range host {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("launch: %s: %w (run make deps / make build)", b, err)
		}
	}
	return o.Stack.checkRoot(append([]string{StockSlurmd, StockSlurmctld, o.SlurmdGo}, clientCommands...)...)
}

// writeKey writes a fresh random slurm.key beside slurm.conf (mode 0600, as auth/slurm
// insists) for an auth/slurm cluster.
func (c *Cluster) writeKey() error {
	key := make([]byte, KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("launch: slurm.key: %w", err)
	}
	c.KeyPath = filepath.Join(c.Dir, KeyFile)
	if err := os.WriteFile(c.KeyPath, key, 0o600); err != nil {
		return fmt.Errorf("launch: slurm.key: %w", err)
	}
	return nil
}

// argv is the command line that runs argv as process role of this cluster: unchanged on the
// host; in the chroot, in a private mount namespace with the role's own SACK directories
// (<dir>/run/<role>/{slurm,slurmctld}). Client roles ("" or "client") get an empty
// /run/slurm and slurmctld's /run/slurmctld.
func (c *Cluster) argv(role string, chrootOpts []string, argv ...string) []string {
	if c.Stack.Root() == "" {
		return argv
	}
	runSlurm, runCtld := c.runDir(role, "slurm"), c.runDir(role, "slurmctld")
	if role == "" || role == "client" {
		runSlurm, runCtld = c.runDir("client", "slurm"), c.runDir("slurmctld", "slurmctld")
	}
	return c.Stack.wrap(runSlurm, runCtld, chrootOpts, argv...)
}

// runDir is <dir>/run/<role>/<sub>, created on first use (0755, as slurmd creates /run/slurm).
func (c *Cluster) runDir(role, sub string) string {
	d := filepath.Join(c.Dir, "run", role, sub)
	_ = os.MkdirAll(d, 0o755)
	return d
}

// SackSocket is the SACK socket of a process role of a chroot cluster, seen from the host
// ("" for the host's 22.05 or with munge): the node daemons' at /run/slurm, slurmctld's at
// /run/slurmctld.
func (c *Cluster) SackSocket(role string) string {
	if c.Stack.Root() == "" || c.Stack.UsesMunged() {
		return ""
	}
	if role == "slurmctld" {
		return filepath.Join(c.runDir(role, "slurmctld"), "sack.socket")
	}
	return filepath.Join(c.runDir(role, "slurm"), "sack.socket")
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
	}
	lines = append(lines, c.authLines()...)
	lines = append(lines,
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
		"StateSaveLocation="+c.Dir+"/state",
		"SlurmdSpoolDir="+c.Dir+"/spool/%n",
		"SlurmdPidFile="+c.Dir+"/%n.pid",
		"SlurmdLogFile="+c.Dir+"/%n.log",
		"SlurmctldPidFile="+c.Dir+"/slurmctld.pid",
		"SlurmctldLogFile="+c.Dir+"/slurmctld.log",
		"SlurmctldDebug=info",
		"SlurmdDebug="+c.opts.SlurmdDebug,
	)
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
	// One multi-node partition per daemon with extra nodes: the daemon and its extra nodes,
	// all of one implementation, for the scenarios that need a step on several nodes.
	for _, n := range c.Nodes {
		if part, nodes := c.Nodeset(n.Name); len(nodes) > 1 {
			lines = append(lines, fmt.Sprintf("PartitionName=%s Nodes=%s MaxTime=INFINITE State=UP", part, strings.Join(nodes, ",")))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// authLines are slurm.conf's auth settings: munge through the private munged's socket, or
// auth/slurm and cred/slurm with the slurm.key beside slurm.conf (no AuthInfo: its default
// 60 s token lifetime).
func (c *Cluster) authLines() []string {
	if c.Stack.UsesMunged() {
		return []string{"AuthType=auth/munge", "AuthInfo=socket=" + c.MungeSocket, "CredType=cred/munge"}
	}
	return []string{"AuthType=auth/slurm", "CredType=cred/slurm"}
}

// renderCgroupConf is cgroup.conf ("" for none). The 24.11 slurmd always initialises a
// cgroup plugin and, left to autodetect, loads cgroup/v1 on this host; proctrack/pgid and
// task/none use none of it, so the chroot release runs without (CgroupPlugin=disabled, a
// 24.11 keyword that 22.05 lacks), the same for both node daemons.
func (c *Cluster) renderCgroupConf() string {
	if c.Stack.Root() == "" {
		return ""
	}
	return "# generated by bench/internal/launch; do not edit\nCgroupPlugin=disabled\n"
}

// Partition is the partition that holds only node name.
func (c *Cluster) Partition(name string) string { return "p" + name }

// Nodeset is node name's multi-node partition and its nodes: name first, then its extra nodes
// (NodeSpec.Of) in start order. A node without extra nodes has only itself, and no partition
// of that kind exists for it.
func (c *Cluster) Nodeset(name string) (partition string, nodes []string) {
	nodes = []string{name}
	for _, n := range c.Nodes {
		if n.Of == name {
			nodes = append(nodes, n.Name)
		}
	}
	return "n" + name, nodes
}

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
	out, err := c.Command(ctx, name, args...).CombinedOutput()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v, limit %v)", ctx.Err(), err, limit)
	}
	return string(out), err
}

// Command is the command that runs a client command (or any program of the stack's root, such
// as a compiler) against the cluster, as Run does, for a caller that reads its output as it
// comes; ctx bounds it.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := c.argv("client", nil, append([]string{name}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = c.Env()
	cmd.WaitDelay = clientWaitDelay
	return cmd
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
// for its "ready" line. It runs on the host (it is the bench's own Go program) and speaks the
// stack's release with the cluster's munged socket or slurm.key.
func (c *Cluster) StartLimitServer(ctx context.Context, bin, mode string) (p *Proc, addr, statsAddr string, err error) {
	ports, err := pickPorts(2)
	if err != nil {
		return nil, "", "", err
	}
	addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	statsAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	out := filepath.Join(c.Dir, "limitsrv-"+mode+".out")
	argv := []string{bin, "-mode", mode, "-listen", addr, "-stats", statsAddr, "-release", c.Stack.Release}
	if c.MungeSocket != "" {
		argv = append(argv, "-munge-socket", c.MungeSocket)
	}
	if c.KeyPath != "" {
		argv = append(argv, "-key", c.KeyPath, "-cluster", c.Name)
	}
	p, err = startProc(c.sp, "limitsrv-"+mode, out, c.Env(), nil, argv...)
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
