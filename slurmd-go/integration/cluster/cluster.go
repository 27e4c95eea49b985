package cluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
)

// Named timeouts: every wait in the harness is bounded by one of these.
const (
	mungeStartTimeout   = 20 * time.Second // scripts/ensure-munged.sh
	ctldStartTimeout    = 30 * time.Second // slurmctld answers `scontrol ping`
	nodeRegisterTimeout = 30 * time.Second // Start: every node idle
	clientCmdTimeout    = 30 * time.Second // one sinfo/scontrol/... invocation
	daemonStopTimeout   = 15 * time.Second // SIGTERM -> SIGKILL
	daemonKillWait      = 10 * time.Second // SIGKILL -> reaped
	hardwareTimeout     = 20 * time.Second // slurmd -C
	pollInterval        = 250 * time.Millisecond
	logTailLines        = 60 // of each daemon log, on failure
	outTailLines        = 20 // of each daemon's stdout/stderr, on failure
)

// Paths of the stock Debian binaries, on the host (22.05) and inside each release's
// root alike.
const (
	StockSlurmd    = "/usr/sbin/slurmd"
	StockSlurmctld = "/usr/sbin/slurmctld"
)

// Environment knobs.
const (
	EnvImpl      = "TIEE_SLURMD_IMPL"      // "go" (default) or "stock"
	EnvSlurmdBin = "TIEE_SLURMD_BIN"       // overrides <repo>/bin/slurmd-go for Impl "go"
	EnvKeep      = "TIEE_INTEGRATION_KEEP" // "1": keep Dir (logs, conf) even on success
)

// Impl values.
const (
	ImplGo    = "go"
	ImplStock = "stock"
)

// Options configure Start. The zero value is a 4-node cluster of the implementation
// named by $TIEE_SLURMD_IMPL.
type Options struct {
	// Impl is "go" or "stock"; empty means $TIEE_SLURMD_IMPL, else "go".
	Impl string
	// Release is the Slurm release of every Slurm process ("22.05", "24.11",
	// "26.05"); empty means $TIEE_SLURM_RELEASE, else 22.05.
	Release string
	// Auth is "munge" or "slurm"; empty means $TIEE_AUTH, else munge.
	Auth string
	// Nodes is the number of static nodes (default 4), named NodePrefix+1..N.
	Nodes int
	// NodePrefix defaults to "t" (never the machine's hostname).
	NodePrefix string
	// SlurmdTimeout in seconds (default 8).
	SlurmdTimeout int
	// MaxNodeCount (default Nodes+4) leaves room for dynamic nodes.
	MaxNodeCount int
	// NodeExtra is appended to every static NodeName line (e.g. "TmpDisk=64 Feature=x").
	NodeExtra string
	// ExtraConf lines: a line whose key matches a generated global line replaces
	// it (e.g. "SlurmdDebug=debug3"); others (NodeName=, PartitionName=, new keys)
	// are appended.
	ExtraConf []string
	// DaemonArgs are extra arguments for every node daemon (both impls get the same).
	DaemonArgs []string
	// NoWait makes Start return without waiting for the nodes to be idle.
	NoWait bool
	// Unstarted names static nodes whose daemon Start leaves to the test
	// (a Kubernetes pod, say); Start waits for the others only.
	Unstarted []string
	// Prolog and Epilog are script texts (starting with a #! line). A non-empty one is
	// written to Dir/prolog or Dir/epilog (0755) and configured as Prolog= / Epilog=
	// (run by the node daemon as root, see PrologPath/EpilogPath).
	Prolog, Epilog string
	// CgroupConf lines, if any, are written to Dir/cgroup.conf, next to slurm.conf,
	// where the daemons read it (get_extra_conf_path). Stop then removes the empty
	// cgroup directories the nodes left (slurm_<NodeName> under every cgroup v1
	// controller and the v2 hierarchy, the MULTIPLE_SLURMD CgroupPrepend).
	CgroupConf []string
	// GresConf lines, if any, are written to Dir/gres.conf, next to slurm.conf,
	// where every node daemon of the cluster reads it (select lines per node
	// with NodeName=). GresTypes goes in ExtraConf and a node's Gres= in
	// NodeExtra.
	GresConf []string
	// TopologyConf lines, if any, are written to Dir/topology.conf, where
	// slurmctld's topology plugin (TopologyPlugin= in ExtraConf) reads it.
	TopologyConf []string
	// JobSubmitLua, if set, is written to Dir/job_submit.lua, where
	// slurmctld's job_submit/lua (JobSubmitPlugins=lua in ExtraConf) reads it.
	JobSubmitLua string
	// NodeRelease is the release whose chroot the node daemons, and so their jobs
	// and the client commands those run, live in: a cluster of two releases (a 24.11
	// node under a 26.05 slurmctld). Empty means Release. Impl stock is that
	// release's slurmd.
	NodeRelease string
	// DaemonEnv is added to every node daemon's environment (e.g. TIEE_SLURM_PROTOCOL).
	DaemonEnv []string
	// PlugStack, if set, is plugstack.conf's text (SPANK plugins: "required|optional
	// <path> [args]" lines), written to Dir/plugstack.conf (see PlugStackPath) and
	// configured as PlugStackConfig=. Dir is the same path inside a release's root,
	// so the daemons, slurmstepd and the client commands all read that one file; a
	// plugin's path is one inside the root of the process that loads it (see
	// BuildSpankPlugin for plugins of the test's own).
	PlugStack string
	// Zones, if set, names the network zone of each static node (len == Nodes; ""
	// entries are not allowed): every node daemon, and so its step managers and
	// tasks, then runs in a network namespace of its own with an address of its
	// zone's subnet, zones reach each other through the root namespace (where
	// slurmctld and the client commands stay), and SetZoneLatency / BlockZones
	// shape the traffic between zones (zones.go). Slurm 22.05 (the host) only.
	// Empty: every daemon on 127.0.0.1, as without it.
	Zones []string
	// Tmpfs puts Dir under /dev/shm instead of /tmp. slurmctld fsyncs its state save
	// files on every job change, which takes seconds on this machine's disk and
	// throttles job throughput; a tmpfs makes that free. Default off.
	Tmpfs bool
}

// Node is one static node of the cluster.
type Node struct {
	Name string
	Port int
}

// Cluster is a running private cluster. Exported fields are read-only after Start.
type Cluster struct {
	Name     string // ClusterName
	Dir      string // everything lives here: slurm.conf, logs, spool, state
	ConfPath string
	Impl     string
	// Release is the Slurm release every Slurm process of the cluster belongs to
	// ("24.11"); ProtocolVersion and MinProtocolVersion are its wire versions
	// (0x2A00, 0x2700).
	Release                             string
	ProtocolVersion, MinProtocolVersion uint16
	// Auth is "munge" or "slurm" (AuthType/CredType auth/slurm + cred/slurm).
	Auth string
	// StockVersion is the version the release's stock slurmd reports ("24.11.5",
	// from `slurmd -V`): what slurmctld and scontrol show for a stock node.
	StockVersion string
	// Root is the release's chroot, where every Slurm process of the cluster runs
	// ("" on the host, 22.05). Paths under /tmp and /dev/shm (Dir) and the
	// repository are the same inside and out.
	Root string
	// NodeRelease and NodeRoot are Options.NodeRelease and its chroot: where the
	// node daemons run (Release and Root unless the cluster mixes releases).
	NodeRelease, NodeRoot string
	SlurmdBin             string // node daemon binary, as a path inside NodeRoot
	CtldPort              int
	SlurmdPort            int // global SlurmdPort: what -Z dynamic nodes listen on
	Nodes                 []Node
	HW                    Hardware
	SlurmdTimeout         time.Duration
	PingInterval          time.Duration // SlurmdTimeout/3, as slurmctld computes it
	// MessageTimeout as configured: slurmctld's agent waits this long for a reply,
	// and a connect to a dead slurmd is retried for about as long.
	MessageTimeout time.Duration
	RepoRoot       string

	t    testing.TB
	opts Options
	sp   *spawn.Spawner

	// ns holds the cluster's private mount namespace (auth/slurm in a chroot; see
	// startMountNS), nil otherwise. Set in Start before any daemon, then read-only.
	ns *proc
	// zn is the network zones of Options.Zones (nil without); set in Start before
	// any daemon, then read-only (its latency queue has its own lock).
	zn *zoneNet

	mu sync.Mutex // guards ctld, procs, dyn
	// sackMu serializes the start of stock node daemons under auth/slurm
	// (see startNodeProc).
	sackMu sync.Mutex
	ctld   *proc               // guarded by mu
	procs  map[string]*proc    // node name -> daemon; guarded by mu
	env    map[string][]string // node name -> extra environment (SetNodeEnv); guarded by mu
	dyn    map[string]string   // dynamic node name -> --conf; guarded by mu

	stopOnce sync.Once
}

// Start brings up munged (if needed), slurmctld and the node daemons, and waits until
// every node is idle (unless opts.NoWait). Stop is registered with t.Cleanup.
// Test goroutine only.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("cluster: integration tests must run as root (slurmctld/slurmd run as SlurmUser=root); run `sudo go test -tags integration ./slurmd-go/integration/...`")
	}
	opts = withDefaults(opts)
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	rel, err := LookupRelease(opts.Release)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if opts.Auth, err = checkAuth(rel, opts.Auth); err != nil {
		t.Fatalf("%v", err)
	}
	c := &Cluster{
		Impl:               opts.Impl,
		Release:            rel.Name,
		ProtocolVersion:    rel.ProtocolVersion,
		MinProtocolVersion: rel.MinProtocolVersion,
		Auth:               opts.Auth,
		Root:               rel.Root(),
		RepoRoot:           root,
		SlurmdTimeout:      time.Duration(opts.SlurmdTimeout) * time.Second,
		PingInterval:       time.Duration(opts.SlurmdTimeout/3) * time.Second,
		MessageTimeout:     messageTimeout,
		t:                  t,
		opts:               opts,
		procs:              map[string]*proc{},
		dyn:                map[string]string{},
	}
	nodeRel := rel
	if opts.NodeRelease != "" {
		if nodeRel, err = LookupRelease(opts.NodeRelease); err != nil {
			t.Fatalf("%v", err)
		}
		if opts.Auth == AuthSlurm && nodeRel.Name != rel.Name {
			// startMountNS makes private /run/slurm and /run/slurmctld in one root only.
			t.Fatalf("cluster: auth/slurm with nodes of another release (%s under %s) is not supported", nodeRel.Name, rel.Name)
		}
	}
	c.NodeRelease, c.NodeRoot = nodeRel.Name, nodeRel.Root()
	for _, r := range []Release{rel, nodeRel} {
		if err := ensureChroot(root, r); err != nil {
			t.Fatalf("%v", err)
		}
	}
	if len(opts.Zones) > 0 && (c.Root != "" || c.NodeRoot != "") {
		t.Fatalf("cluster: Options.Zones needs Slurm 22.05 on the host (TIEE_SLURM_RELEASE=22.05); release %s runs in chroot %q, nodes (%s) in %q",
			c.Release, c.Root, c.NodeRelease, c.NodeRoot)
	}
	if c.SlurmdBin, err = slurmdBinary(opts.Impl, root, nodeRel); err != nil {
		t.Fatalf("%v", err)
	}
	for _, x := range []struct {
		r Release
		b string
	}{{rel, StockSlurmctld}, {rel, StockSlurmd}, {nodeRel, StockSlurmd}} {
		if !isExecutable(x.r.HostPath(x.b)) {
			t.Fatalf("cluster: %s missing for Slurm %s (run scripts/install-deps.sh; scripts/chroots.sh %s)", x.r.HostPath(x.b), x.r.Name, x.r.Name)
		}
	}
	clients := []string{"sinfo", "scontrol"}
	if opts.Auth == AuthMunge {
		clients = append(clients, "munge", "unmunge")
	}
	for _, b := range clients {
		if _, err := lookPathIn(c.Root, b); err != nil {
			t.Fatalf("%v (run scripts/install-deps.sh)", err)
		}
	}
	if opts.Auth == AuthMunge {
		// The chroots bind the host's /run/munge: one munged serves every release.
		if err := ensureMunged(root); err != nil {
			t.Fatalf("%v", err)
		}
	}
	if c.HW, err = hardware(rel); err != nil {
		t.Fatalf("%v", err)
	}
	if c.StockVersion, err = releaseVersion(nodeRel); err != nil {
		t.Fatalf("%v", err)
	}

	// Short paths: unix sockets in SlurmdSpoolDir must stay under 108 bytes.
	base := "/tmp"
	if opts.Tmpfs {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "ti-")
	if err != nil {
		t.Fatalf("cluster: temp dir: %v", err)
	}
	// Readable by the ordinary test user (slurm.conf) and by the daemons.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("cluster: chmod %s: %v", dir, err)
	}
	c.Dir = dir
	c.ConfPath = filepath.Join(dir, "slurm.conf")
	c.sp = spawn.New()
	t.Cleanup(c.Stop)
	for _, d := range []string{"state", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("cluster: %v", err)
		}
	}
	if err := c.writeScripts(); err != nil {
		t.Fatalf("%v", err)
	}
	if opts.Auth == AuthSlurm {
		if err := writeSlurmKey(c.SlurmKeyPath()); err != nil {
			t.Fatalf("%v", err)
		}
		if c.Root != "" {
			c.startMountNS(t)
		}
	}

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	c.Name = "ti" + hex.EncodeToString(suffix) // ClusterName must be lower case

	ports, err := pickPorts(opts.Nodes + 2)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c.CtldPort, c.SlurmdPort = ports[0], ports[1]
	for i := 0; i < opts.Nodes; i++ {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("%s%d", opts.NodePrefix, i+1), Port: ports[i+2]})
	}
	if len(opts.Zones) > 0 {
		c.startZones(t)
	}
	if err := c.writeConf(nil); err != nil {
		t.Fatalf("%v", err)
	}
	t.Logf("cluster %s: impl=%s slurm=%s (root %q) nodes=%s (%s, root %q) auth=%s slurmd=%s dir=%s ctld=:%d slurmd ports=%v hw=%+v",
		c.Name, c.Impl, c.Release, c.Root, c.NodeRelease, c.StockVersion, c.NodeRoot, c.Auth, c.SlurmdBin, c.Dir, c.CtldPort, c.Nodes, c.HW)

	c.startCtld(t)
	var started []string
	for _, n := range c.Nodes {
		if !slices.Contains(opts.Unstarted, n.Name) {
			c.StartNode(t, n.Name)
			started = append(started, n.Name)
		}
	}
	if !opts.NoWait && len(started) > 0 {
		c.WaitNodes(t, "idle", started, nodeRegisterTimeout)
	}
	return c
}

func withDefaults(o Options) Options {
	if o.Impl == "" {
		o.Impl = os.Getenv(EnvImpl)
	}
	if o.Impl == "" {
		o.Impl = ImplGo
	}
	if o.Release == "" {
		o.Release = os.Getenv(EnvRelease)
	}
	if o.Auth == "" {
		o.Auth = os.Getenv(EnvAuth)
	}
	if o.Nodes <= 0 {
		o.Nodes = 4
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "t"
	}
	if o.SlurmdTimeout <= 0 {
		o.SlurmdTimeout = 8
	}
	if o.MaxNodeCount <= 0 {
		o.MaxNodeCount = o.Nodes + 4
	}
	return o
}

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cluster: getwd: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("cluster: no go.mod above the working directory")
		}
		d = parent
	}
}

// slurmdBinary is the node daemon of impl as a path inside the release's root: the
// stock slurmd of the release, or bin/slurmd-go, which scripts/chroots.sh makes
// visible at its own path inside every root (the repository is bind-mounted).
func slurmdBinary(impl, repo string, rel Release) (string, error) {
	switch impl {
	case ImplStock:
		return StockSlurmd, nil
	case ImplGo:
		bin := os.Getenv(EnvSlurmdBin)
		if bin == "" {
			bin = filepath.Join(repo, "bin", "slurmd-go")
		}
		if !isExecutable(bin) {
			return "", fmt.Errorf("cluster: %s=go but %s is not an executable (run `make build`, set %s, or %s=stock)", EnvImpl, bin, EnvSlurmdBin, EnvImpl)
		}
		if abs, err := filepath.Abs(bin); err == nil {
			bin = abs
		}
		if !isExecutable(rel.HostPath(bin)) {
			return "", fmt.Errorf("cluster: %s is not visible inside %s (scripts/chroots.sh binds only this repository; TIEE_CHROOT_BIND names more)", bin, rel.Root())
		}
		return bin, nil
	default:
		return "", fmt.Errorf("cluster: unknown implementation %q (want %q or %q)", impl, ImplGo, ImplStock)
	}
}

func ensureMunged(root string) error {
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "ensure-munged.sh"))
	out, err := runBounded(cmd, mungeStartTimeout)
	if err != nil {
		return fmt.Errorf("cluster: scripts/ensure-munged.sh: %w: %s", err, out)
	}
	return nil
}

// releaseFacts is what the harness asks a release's stock slurmd once per test
// binary.
type releaseFacts struct {
	hw      Hardware
	version string
}

var (
	factsMu sync.Mutex
	facts   = map[string]releaseFacts{} // release -> its facts; guarded by factsMu
)

// factsOf runs the release's `slurmd -C` and `slurmd -V` once.
func factsOf(rel Release) (releaseFacts, error) {
	factsMu.Lock()
	defer factsMu.Unlock()
	if f, ok := facts[rel.Name]; ok {
		return f, nil
	}
	cmd, err := rel.Command(StockSlurmd, "-C")
	if err != nil {
		return releaseFacts{}, err
	}
	out, err := runBounded(cmd, hardwareTimeout)
	if err != nil {
		return releaseFacts{}, fmt.Errorf("cluster: %s -C (Slurm %s): %w: %s", StockSlurmd, rel.Name, err, out)
	}
	var f releaseFacts
	if f.hw, err = parseSlurmdC(out); err != nil {
		return releaseFacts{}, err
	}
	if f.version, err = stockVersion(rel); err != nil {
		return releaseFacts{}, err
	}
	facts[rel.Name] = f
	return f, nil
}

// hardware is what the release's stock `slurmd -C` reports (also for Impl "go": it
// is the reference).
func hardware(rel Release) (Hardware, error) {
	f, err := factsOf(rel)
	return f.hw, err
}

// releaseVersion is the release's stock `slurmd -V` version.
func releaseVersion(rel Release) (string, error) {
	f, err := factsOf(rel)
	return f.version, err
}

// runBounded runs cmd (combined output) and kills it after d.
func runBounded(cmd *exec.Cmd, d time.Duration) (string, error) {
	var buf strings.Builder
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return buf.String(), err
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
		return buf.String(), fmt.Errorf("timed out after %v", d)
	}
}

// SlurmKeyPath is the auth/slurm key: next to slurm.conf, where the daemons read
// it (auth/slurm init_internal: get_extra_conf_path("slurm.key"), the directory of
// $SLURM_CONF, which the daemons set from -f). Clients never read it: they ask a
// daemon's SACK socket for their tokens.
func (c *Cluster) SlurmKeyPath() string { return filepath.Join(c.Dir, "slurm.key") }

// slurmKeySize is the size of the generated key (Slurm's docs: 1024 random bytes).
const slurmKeySize = 1024

// writeSlurmKey writes a fresh random key, mode 0600: auth/slurm refuses a key that
// others may read (_check_key_permissions).
func writeSlurmKey(path string) error {
	key := make([]byte, slurmKeySize)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("cluster: slurm.key: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	return nil
}

// PrologPath and EpilogPath are where Options.Prolog / Options.Epilog are written.
func (c *Cluster) PrologPath() string { return filepath.Join(c.Dir, "prolog") }
func (c *Cluster) EpilogPath() string { return filepath.Join(c.Dir, "epilog") }

// CgroupConfPath is where Options.CgroupConf is written.
func (c *Cluster) CgroupConfPath() string { return filepath.Join(c.Dir, "cgroup.conf") }

// TopologyConfPath is where Options.TopologyConf is written.
func (c *Cluster) TopologyConfPath() string { return filepath.Join(c.Dir, "topology.conf") }

// GresConfPath is where Options.GresConf is written.
func (c *Cluster) GresConfPath() string { return filepath.Join(c.Dir, "gres.conf") }

// PlugStackPath is where Options.PlugStack (and SetPlugStack) is written.
func (c *Cluster) PlugStackPath() string { return filepath.Join(c.Dir, "plugstack.conf") }

// SetPlugStack replaces plugstack.conf's text (the cluster must have been started
// with a non-empty Options.PlugStack, so that PlugStackConfig= names it). No daemon
// is told: srun, sbatch and every new slurmstepd read the file when they start,
// while a running slurmd keeps the slurmd-context plugins it loaded at its start.
// Any goroutine, but not while a command that reads it starts.
func (c *Cluster) SetPlugStack(t testing.TB, text string) {
	t.Helper()
	if c.opts.PlugStack == "" {
		t.Fatalf("cluster: SetPlugStack on %s, started without Options.PlugStack", c.Name)
	}
	if err := writeFileAtomic(c.PlugStackPath(), text, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
}

// writeFileAtomic writes text to path through a rename, so that no reader sees a
// partial file, with exactly mode perm.
func writeFileAtomic(path, text string, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), perm); err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return fmt.Errorf("cluster: chmod %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	return nil
}

// writeScripts writes the Prolog/Epilog scripts, cgroup.conf, gres.conf and
// plugstack.conf of the options.
func (c *Cluster) writeScripts() error {
	type file struct {
		path, text string
		mode       os.FileMode
	}
	files := []file{
		{c.PrologPath(), c.opts.Prolog, 0o755},
		{c.EpilogPath(), c.opts.Epilog, 0o755},
		{c.PlugStackPath(), c.opts.PlugStack, 0o644},
	}
	if len(c.opts.CgroupConf) > 0 {
		text := "# generated by slurmd-go/integration/cluster\n" + strings.Join(c.opts.CgroupConf, "\n") + "\n"
		files = append(files, file{c.CgroupConfPath(), text, 0o644})
	}
	if len(c.opts.TopologyConf) > 0 {
		text := "# generated by slurmd-go/integration/cluster\n" + strings.Join(c.opts.TopologyConf, "\n") + "\n"
		files = append(files, file{c.TopologyConfPath(), text, 0o644})
	}
	if len(c.opts.GresConf) > 0 {
		text := "# generated by slurmd-go/integration/cluster\n" + strings.Join(c.opts.GresConf, "\n") + "\n"
		files = append(files, file{c.GresConfPath(), text, 0o644})
	}
	files = append(files, file{filepath.Join(c.Dir, "job_submit.lua"), c.opts.JobSubmitLua, 0o644})
	for _, f := range files {
		if f.text == "" {
			continue
		}
		if err := os.WriteFile(f.path, []byte(f.text), f.mode); err != nil {
			return fmt.Errorf("cluster: write %s: %w", f.path, err)
		}
		if err := os.Chmod(f.path, f.mode); err != nil { // WriteFile's mode is masked by the umask
			return fmt.Errorf("cluster: chmod %s: %w", f.path, err)
		}
	}
	return nil
}

// scriptLines are the Prolog=/Epilog=/PlugStackConfig= lines for the configured files.
func (c *Cluster) scriptLines() []string {
	var l []string
	if c.opts.Prolog != "" {
		l = append(l, "Prolog="+c.PrologPath())
	}
	if c.opts.Epilog != "" {
		l = append(l, "Epilog="+c.EpilogPath())
	}
	if c.opts.PlugStack != "" {
		l = append(l, "PlugStackConfig="+c.PlugStackPath())
	}
	return l
}

func (c *Cluster) writeConf(extra []string) error {
	p := confParams{
		Auth:          c.Auth,
		ClusterName:   c.Name,
		Dir:           c.Dir,
		CtldPort:      c.CtldPort,
		SlurmdPort:    c.SlurmdPort,
		Nodes:         c.Nodes,
		NodeAddrs:     c.zn.nodeAddrs(),
		CtldAddr:      c.zn.ctldAddr(),
		HW:            c.HW,
		SlurmdTimeout: c.opts.SlurmdTimeout,
		MaxNodeCount:  c.opts.MaxNodeCount,
		NodeExtra:     c.opts.NodeExtra,
		Extra:         append(append(c.scriptLines(), c.opts.ExtraConf...), extra...),
	}
	tmp := c.ConfPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(renderConf(p)), 0o644); err != nil {
		return fmt.Errorf("cluster: write slurm.conf: %w", err)
	}
	if err := os.Rename(tmp, c.ConfPath); err != nil {
		return fmt.Errorf("cluster: write slurm.conf: %w", err)
	}
	return nil
}

// SetConf rewrites slurm.conf from the Start options plus lines (same override rules
// as Options.ExtraConf). It does not tell any daemon; follow with
// `scontrol reconfigure` or a restart. Test goroutine only.
func (c *Cluster) SetConf(t testing.TB, lines ...string) {
	t.Helper()
	if err := c.writeConf(lines); err != nil {
		t.Fatalf("%v", err)
	}
}

// daemonEnv is the test binary's environment without any SLURM_* / SLURMD_* variable
// that could redirect a daemon or client to another cluster.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLURM") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (c *Cluster) startCtld(t testing.TB) {
	t.Helper()
	cmd, err := wrapCommand(c.spec("/", StockSlurmctld, "-D", "-f", c.ConfPath))
	if err != nil {
		t.Fatalf("%v", err)
	}
	p, err := startProc(c.sp, "slurmctld", filepath.Join(c.Dir, "slurmctld.out"), daemonEnv(), cmd)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c.mu.Lock()
	c.ctld = p
	c.mu.Unlock()
	c.WaitFor(t, "slurmctld answers scontrol ping", ctldStartTimeout, func() (bool, string) {
		if p.exited() {
			t.Fatalf("cluster: %s before answering ping; see %s", p.status(), filepath.Join(c.Dir, "slurmctld.log"))
		}
		out, _, err := c.Run(t, "", "scontrol", "ping")
		return err == nil && strings.Contains(out, "is UP"), strings.TrimSpace(out)
	})
}

// CtldPID is the pid of the running slurmctld.
func (c *Cluster) CtldPID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctld.pid()
}

// RestartCtld stops slurmctld (SIGTERM, bounded), starts it again with the same
// slurm.conf and StateSaveLocation, and waits until it answers ping. It does not wait
// for the nodes. Test goroutine only.
func (c *Cluster) RestartCtld(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	p := c.ctld
	c.mu.Unlock()
	if err := p.stop(daemonStopTimeout); err != nil {
		t.Fatalf("%v", err)
	}
	c.startCtld(t)
}

// NodeNames are the static node names in order.
func (c *Cluster) NodeNames() []string {
	var ns []string
	for _, n := range c.Nodes {
		ns = append(ns, n.Name)
	}
	return ns
}

// SetNodeEnv adds env to the environment of name's daemon from its next
// start on (a configless node's SLURM_SACK_KEY, say). Any goroutine.
func (c *Cluster) SetNodeEnv(name string, env ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.env == nil {
		c.env = map[string][]string{}
	}
	c.env[name] = env
}

// NodeLog is the SlurmdLogFile of a node; NodeOut its captured stdout/stderr.
func (c *Cluster) NodeLog(name string) string { return filepath.Join(c.Dir, name+".log") }
func (c *Cluster) NodeOut(name string) string { return filepath.Join(c.Dir, name+".out") }

// CtldLog is the SlurmctldLogFile.
func (c *Cluster) CtldLog() string { return filepath.Join(c.Dir, "slurmctld.log") }

func (c *Cluster) isStatic(name string) bool {
	for _, n := range c.Nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

// StartNode starts the node daemon of a static node: `<slurmd> -D -N name -f conf`
// (plus Options.DaemonArgs), identical for both implementations. It does not wait
// for registration (use WaitNodes). Fatal if that node's daemon is running.
// Test goroutine only.
func (c *Cluster) StartNode(t testing.TB, name string) {
	t.Helper()
	if !c.isStatic(name) {
		t.Fatalf("cluster: %s is not a static node of %s (have %v)", name, c.Name, c.NodeNames())
	}
	args := append([]string{c.SlurmdBin, "-D", "-N", name, "-f", c.ConfPath}, c.opts.DaemonArgs...)
	c.startNodeProc(t, name, args)
}

// StartDynamicNode starts `<slurmd> -D -N name -f conf -Z --conf "<conf>"`: a dynamic
// node unknown to slurm.conf. In 22.05 it listens on the global SlurmdPort (Port= is
// forbidden in --conf), so at most one dynamic node runs per cluster. It does not
// wait for registration. Test goroutine only.
func (c *Cluster) StartDynamicNode(t testing.TB, name, conf string) {
	t.Helper()
	if c.isStatic(name) {
		t.Fatalf("cluster: %s is a static node", name)
	}
	c.mu.Lock()
	for other := range c.dyn {
		if other != name {
			if p := c.procs[other]; p != nil && !p.exited() {
				c.mu.Unlock()
				t.Fatalf("cluster: dynamic node %s already listens on SlurmdPort %d", other, c.SlurmdPort)
			}
		}
	}
	c.dyn[name] = conf
	c.mu.Unlock()
	args := []string{c.SlurmdBin, "-D", "-N", name, "-f", c.ConfPath, "-Z"}
	if conf != "" {
		args = append(args, "--conf", conf)
	}
	args = append(args, c.opts.DaemonArgs...)
	c.startNodeProc(t, name, args)
}

// StrayHighFD is the higher of the two descriptors (3 and this) every node daemon
// inherits from the harness, open on /dev/null without close-on-exec.
const StrayHighFD = 250

// startNodeProc starts a node daemon. Stock slurmd under auth/slurm unlinks
// /run/slurm/sack.socket and binds it anew at start (sack.c init_sack_conmgr);
// two nodes of one cluster starting at once on this host (one /run/slurm)
// race between the unlink and the bind, and the loser dies with "Unable to
// bind UNIX socket: Address already in use". A real node has its own /run.
// So such starts go one at a time, each until the daemon has bound.
func (c *Cluster) startNodeProc(t testing.TB, name string, args []string) {
	t.Helper()
	if c.Impl != ImplStock || c.Auth != AuthSlurm {
		c.spawnNode(t, name, args)
		return
	}
	c.sackMu.Lock()
	defer c.sackMu.Unlock()
	var from int64
	if fi, err := os.Stat(c.NodeLog(name)); err == nil {
		from = fi.Size() // the log is appended to across restarts
	}
	c.spawnNode(t, name, args)
	c.waitSACKBound(t, name, from)
}

// sackBoundLines: what stock logs once auth/slurm's init_sack_conmgr has
// bound its socket: the plugin's own line (debug) where the log is open by
// then, else slurmd's start line, which comes after every plugin's init
// (24.11 loads auth/slurm before it opens SlurmdLogFile).
var sackBoundLines = []string{"auth/slurm: init: loaded: internal=", "slurmd started on "}

// sackBindTimeout bounds the wait for sackBoundLines; sackPoll is how often
// the log is read meanwhile (short: every stock cluster start waits so).
const (
	sackBindTimeout = 20 * time.Second
	sackPoll        = 50 * time.Millisecond
)

// waitSACKBound waits until name's daemon logged a sackBoundLines line after offset
// from, died, or sackBindTimeout passed (then the start goes on: the level
// may be below debug).
func (c *Cluster) waitSACKBound(t testing.TB, name string, from int64) {
	t.Helper()
	deadline := time.Now().Add(sackBindTimeout)
	var logged []byte // the log from offset from on, read as it grows
	for {
		if f, err := os.Open(c.NodeLog(name)); err == nil {
			if b, err := io.ReadAll(io.NewSectionReader(f, from+int64(len(logged)), 1<<30)); err == nil {
				logged = append(logged, b...)
			}
			f.Close()
			for _, l := range sackBoundLines {
				if bytes.Contains(logged, []byte(l)) {
					return
				}
			}
		}
		if !c.NodeRunning(name) {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("cluster: %s logged none of %q within %v; starting the next node anyway", name, sackBoundLines, sackBindTimeout)
			return
		}
		time.Sleep(sackPoll)
	}
}

func (c *Cluster) spawnNode(t testing.TB, name string, args []string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil && !p.exited() {
		t.Fatalf("cluster: node %s already running (pid %d)", name, p.pid())
	}
	s := c.spec("/", args...)
	s.root = c.NodeRoot
	s.netns = c.zn.netnsPath(name) // "" without zones, and for dynamic nodes
	cmd, err := wrapCommand(s)
	if err != nil {
		t.Fatalf("%v", err)
	}
	// Every node daemon inherits two stray descriptors, as one started from a
	// shell or a service manager does: a node daemon must keep them from its jobs.
	stray, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	defer stray.Close()
	cmd.ExtraFiles = make([]*os.File, StrayHighFD-2)
	cmd.ExtraFiles[0], cmd.ExtraFiles[StrayHighFD-3] = stray, stray
	env := append(append(daemonEnv(), c.opts.DaemonEnv...), c.env[name]...)
	if c.zn != nil {
		// Own addresses, one munged: forwarded credentials are seen twice.
		env = append(env, "TIEE_SHARED_MUNGED=1")
	}
	p, err := startProc(c.sp, name, c.NodeOut(name), env, cmd)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c.procs[name] = p
}

// NodePID is the pid of a node's daemon (0 if never started).
func (c *Cluster) NodePID(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil {
		return p.pid()
	}
	return 0
}

// NodeRunning reports whether the harness-started daemon of name is alive.
func (c *Cluster) NodeRunning(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[name]
	return p != nil && !p.exited()
}

// NodeStarted is when the harness last started name's daemon.
func (c *Cluster) NodeStarted(name string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil {
		return p.started
	}
	return time.Time{}
}

// KillNode sends sig to the node daemon's pid. For SIGKILL, SIGTERM, SIGINT and
// SIGQUIT it then waits (daemonStopTimeout) until the daemon has exited.
// Test goroutine only.
func (c *Cluster) KillNode(t testing.TB, name string, sig syscall.Signal) {
	t.Helper()
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil || p.exited() {
		t.Fatalf("cluster: KillNode %s: not running", name)
	}
	if err := p.signal(sig); err != nil {
		t.Fatalf("cluster: kill -%d %d (%s): %v", sig, p.pid(), name, err)
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT:
		if !p.wait(daemonStopTimeout) {
			t.Fatalf("cluster: %s (pid %d) still running %v after signal %v", name, p.pid(), daemonStopTimeout, sig)
		}
	}
}

// Stop stops exactly the daemons this cluster started (nodes, then slurmctld; by pid:
// SIGTERM, SIGKILL after daemonStopTimeout). Jobs still queued or running are
// cancelled first, and any process those daemons left behind (a slurmstepd with files
// open under Dir, a process in one of this cluster's cgroups) is then SIGKILLed by pid. On test failure it logs the tails of all
// logs and keeps Dir; otherwise it removes Dir. Idempotent; registered by Start.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		t := c.t
		c.mu.Lock()
		var nodes []*proc
		for _, p := range c.procs {
			nodes = append(nodes, p)
		}
		ctld := c.ctld
		c.mu.Unlock()
		// Jobs first: their slurmstepds outlive the node daemons by design.
		if ctld != nil && !ctld.exited() {
			c.cancelJobs(t)
		}
		// SIGTERM everything at once, then wait; a slow one costs one timeout, not N.
		for _, p := range nodes {
			_ = p.signal(syscall.SIGTERM)
		}
		// Only slurmd-go failing to stop is a failure; the real components
		// (slurmctld, stock slurmd) may take longer on a loaded machine and
		// are then killed, which the log says.
		var errs []string
		for _, p := range nodes {
			if err := p.stop(daemonStopTimeout); err != nil {
				if c.Impl == ImplGo {
					errs = append(errs, err.Error())
				} else {
					t.Logf("%v", err)
				}
			}
		}
		if ctld != nil {
			if err := ctld.stop(daemonStopTimeout); err != nil {
				t.Logf("%v", err)
			}
		}
		if c.ns != nil {
			// Its namespace ends with the last process in it; leftovers go below.
			if err := c.ns.stop(daemonStopTimeout); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if c.sp != nil {
			c.sp.Close()
		}
		c.killLeftovers(t)
		if len(c.opts.CgroupConf) > 0 {
			c.removeCgroups(t)
		}
		if c.zn != nil {
			// After every process: nothing is left in the namespaces.
			if err := c.zn.teardown(); err != nil {
				errs = append(errs, err.Error())
			}
		}
		for _, e := range errs {
			t.Errorf("%s", e)
		}
		if c.Dir == "" {
			return
		}
		if t.Failed() {
			c.DumpLogs(t)
			t.Logf("cluster %s: kept %s for inspection", c.Name, c.Dir)
			return
		}
		if os.Getenv(EnvKeep) == "1" {
			t.Logf("cluster %s: %s=1: kept %s", c.Name, EnvKeep, c.Dir)
			return
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			t.Logf("cluster: remove %s: %v", c.Dir, err)
		}
	})
}

// DumpLogs t.Logs the status of every daemon and the tails of slurmctld's and every
// node's log and captured output.
func (c *Cluster) DumpLogs(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	var status []string
	if c.ns != nil {
		status = append(status, c.ns.status())
	}
	if c.ctld != nil {
		status = append(status, c.ctld.status())
	}
	var names []string
	for n := range c.procs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		status = append(status, c.procs[n].status())
	}
	c.mu.Unlock()
	t.Logf("cluster %s (%s) daemons:\n  %s", c.Name, c.Dir, strings.Join(status, "\n  "))
	// The daemons' stdout/stderr mostly repeats their log file (-D); only its end
	// (a panic, a fatal before the log file is open) is new.
	type file struct {
		path  string
		lines int
	}
	files := []file{{c.CtldLog(), logTailLines}, {filepath.Join(c.Dir, "slurmctld.out"), outTailLines}}
	for _, n := range names {
		files = append(files, file{c.NodeLog(n), logTailLines}, file{c.NodeOut(n), outTailLines})
	}
	for _, f := range files {
		t.Logf("==== tail -%d %s\n%s", f.lines, f.path, tail(f.path, f.lines))
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
