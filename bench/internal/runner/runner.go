// Package runner is `benchrun`: it brings up the bench cluster of one stack (Slurm release and
// auth type: a private munged or a fresh slurm.key, a real slurmctld, the release's stock
// slurmd and slurmd-go twice — gnet and plain net — as three nodes of one cluster, and the two
// limit servers), runs the scenarios and returns the raw results.
package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
	"github.com/tiee-hpc/tiee/bench/scenarios"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Defaults.
const (
	// DefaultNofile is the descriptor limit the bench gives itself and every daemon it starts:
	// 5,000 VUs, 5,000 held connections and an open loop's stalled requests need > 10k.
	DefaultNofile = 65536
	// DefaultSources is the number of loopback source addresses the client spreads over. One
	// is enough here: with net.ipv4.tcp_tw_reuse=2 (the default) the kernel reuses TIME_WAIT
	// ports on loopback, so connection-per-RPC at these rates does not exhaust the 28k
	// ephemeral ports (the addr_not_avail count would show it). More addresses have a cost that
	// is an artefact of this machine: the stock slurmd names the peer in its error messages
	// (getnameinfo), and a 127.0.0.x other than 127.0.0.1 is not in /etc/hosts, so each failed
	// connection (every idle connection it drops) waits 5 s on an unreachable DNS server.
	DefaultSources = 1
	// recycledFrames is how many distinct frames the no-auth server is sent, round robin.
	recycledFrames = 64
	// fillParallel is the number of concurrent encodes when making credentials.
	fillParallel = 16
	// mungeInFlight bounds the bench's own concurrent munge calls.
	mungeInFlight = 256
)

// Node names of the three daemons (and, prefixed with p, their partitions).
const (
	nodeStock = "bstock"
	nodeGo    = "bgo"
	nodeGoNet = "bgonet"
	// extraNodes is how many extra nodes of its own kind the stock slurmd and slurmd-go each
	// get (bstock2 … bstock4, bgo2 … bgo4): with its daemon, the 4 nodes of mpi-startup's
	// steps. They idle through every other scenario, which aims at the three nodes above.
	extraNodes = 3
)

// nodeSpecs are the bench cluster's node daemons: the three under test, then the extra
// nodes of the stock slurmd and of slurmd-go (gnet).
func nodeSpecs() []launch.NodeSpec {
	specs := []launch.NodeSpec{
		{Name: nodeStock, Impl: launch.ImplStock},
		{Name: nodeGo, Impl: launch.ImplGo, Env: []string{"TIEE_RPC_SERVER=gnet"}},
		{Name: nodeGoNet, Impl: launch.ImplGo, Env: []string{"TIEE_RPC_SERVER=net"}},
	}
	for _, of := range specs[:2] {
		for i := 2; i <= extraNodes+1; i++ {
			specs = append(specs, launch.NodeSpec{Name: fmt.Sprintf("%s%d", of.Name, i), Impl: of.Impl, Env: of.Env, Of: of.Name})
		}
	}
	return specs
}

// Options configure Run.
type Options struct {
	Profile       scenarios.Profile
	Stack         launch.Stack // release and auth type; the zero value is launch.DefaultStack
	RepoRoot      string
	SlurmdGo      string // bin/slurmd-go
	LimitSrv      string // the limitsrv binary
	WorkDir       string // "" → a new directory under /tmp, removed unless Keep
	Keep          bool
	MungedThreads int
	Sources       int
	Nofile        uint64
	Only          map[string]bool // scenario names; empty: all
	Out           io.Writer       // progress and log lines
	// WaitIdle is how long to wait for the machine to be quiet (1-minute load average below
	// IdleLoad) before starting; the machine is shared, and the bench measures it whole.
	WaitIdle time.Duration
	IdleLoad float64
}

// Run runs the bench and returns its results. The cluster is always stopped before Run
// returns; an error means the bench could not run at all (scenario failures are recorded in
// the results instead).
func Run(ctx context.Context, o Options) (res *results.Results, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Sources <= 0 {
		o.Sources = DefaultSources
	}
	if o.Nofile == 0 {
		o.Nofile = DefaultNofile
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("runner: the bench runs slurmctld and slurmd as root: run it as root")
	}
	var nofile uint64
	nofile, err = launch.RaiseNofile(o.Nofile)
	if err != nil {
		return nil, err
	}
	if o.IdleLoad <= 0 {
		o.IdleLoad = results.DefaultQuietBelow
	}
	waitStart := time.Now()
	load, quiet := waitQuiet(ctx, o.WaitIdle, o.IdleLoad, logf)
	startLoad := &results.MachineLoad{StartAvg1: load, QuietBelow: o.IdleLoad, WaitedS: time.Since(waitStart).Seconds(), Quiet: quiet}
	if !quiet {
		defer func(load float64) {
			if res != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("the machine was not quiet when the bench started (1-minute load average %.1f after waiting %v): other work shared the cores, and every figure was taken under that load", load, o.WaitIdle))
			}
		}(load)
	}
	if o.Stack == (launch.Stack{}) {
		o.Stack = launch.DefaultStack
	}
	start := time.Now()
	p := o.Profile
	res = &results.Results{
		Schema: results.SchemaVersion, Profile: p.Name, Started: start.UTC().Format(time.RFC3339),
		Stack:   stackOf(o.Stack),
		Load:    startLoad,
		Machine: launch.DescribeMachine(o.RepoRoot, o.Stack),
		Config: results.Config{
			VUs: p.VUs, StatusVUs: p.StatusVUs, WarmupS: p.Warmup.Seconds(), DurationS: p.Duration.Seconds(),
			Holds: p.Holds, HoldProbeS: p.HoldProbe.Seconds(), HoldProbeRate: p.HoldProbeRate,
			OpenHeld: p.OpenHeld, OpenDurationS: p.OpenDuration.Seconds(), OpenRateFraction: p.OpenRateFraction,
			RPCTimeoutS: p.RPCTimeout.Seconds(), MessageTimeoutS: launch.MessageTimeout.Seconds(),
			JobsPerCore: launch.JobsPerCore, Only: onlyList(o.Only), NodesPerDaemon: extraNodes + 1,
			SlurmdDebug: "info", MungedThreads: o.MungedThreads, SourceAddrs: o.Sources,
			SampleIntervalMS: float64(procstat.DefaultInterval) / float64(time.Millisecond),
		},
	}
	if nofile < o.Nofile {
		res.Notes = append(res.Notes, fmt.Sprintf("RLIMIT_NOFILE could only be raised to %d (the hard limit; no CAP_SYS_RESOURCE): "+
			"the client and every daemon ran with %d descriptors", nofile, nofile))
	}
	logf("RLIMIT_NOFILE %d for the client and every daemon", nofile)
	dir := o.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("/tmp", "tb-")
		if err != nil {
			return nil, err
		}
		dir = d
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil { // munged (user munge) must reach its socket
		return nil, err
	}
	logf("bench %s on %s (stock %s): work dir %s", p.Name, o.Stack.Label(), res.Stack.Stock, dir)
	c, err := launch.Start(ctx, launch.Options{
		Dir: dir, Stack: o.Stack, SlurmdGo: o.SlurmdGo, MungedThreads: o.MungedThreads, SlurmdDebug: res.Config.SlurmdDebug,
		Nodes: nodeSpecs(),
	})
	if err != nil {
		return nil, fmt.Errorf("runner: start cluster (work dir %s): %w", dir, err)
	}
	defer func() {
		for _, e := range c.Stop() {
			logf("stop: %v", e)
		}
		logf("cluster stopped")
	}()
	logf("cluster %s up: slurmctld :%d, nodes %s :%d (stock), %s :%d (slurmd-go gnet), %s :%d (slurmd-go net); %d extra nodes each for %s and %s",
		c.Name, c.CtldPort, nodeStock, c.Node(nodeStock).Port, nodeGo, c.Node(nodeGo).Port, nodeGoNet, c.Node(nodeGoNet).Port, extraNodes, nodeStock, nodeGo)

	a, err := clientAuth(c)
	if err != nil {
		return nil, err
	}
	var targets []*scenarios.Target
	add := func(name, kind, desc, addr string, pid int, checks bool, node, stats string) error {
		d, err := flood.NewDialer(addr, o.Sources)
		if err != nil {
			return err
		}
		targets = append(targets, &scenarios.Target{
			Target: results.Target{Name: name, Kind: kind, Desc: desc, Addr: addr, PID: pid},
			Dialer: d, ChecksCreds: checks, Node: node, StatsAddr: stats,
		})
		return nil
	}
	for _, n := range []struct{ node, name, desc string }{
		{nodeStock, results.TargetStock, stockDesc(o.Stack, res.Stack.Stock)},
		{nodeGo, results.TargetGo, "slurmd-go, gnet event loops + bounded worker pool (default)"},
		{nodeGoNet, results.TargetGoNet, "slurmd-go, TIEE_RPC_SERVER=net: goroutine per connection, same handlers"},
	} {
		node := c.Node(n.node)
		if err := add(n.name, results.KindDaemon, n.desc, node.Addr(), node.Proc.PID(), true, n.node, ""); err != nil {
			return nil, err
		}
	}
	for _, l := range limitServers(o.Stack) {
		proc, addr, stats, err := c.StartLimitServer(ctx, o.LimitSrv, l.mode)
		if err != nil {
			return nil, err
		}
		if err := add(l.name, results.KindLimit, l.desc, addr, proc.PID(), l.mode != "noauth", "", stats); err != nil {
			return nil, err
		}
	}
	for _, t := range targets {
		res.Targets = append(res.Targets, t.Target)
	}

	env := &scenarios.Env{
		Ctx: ctx, Profile: p, RepoRoot: o.RepoRoot, Stack: o.Stack, Cluster: c, Targets: targets, Auth: a, Res: res, Out: o.Out, Logf: logf,
		FillParallel: fillParallel,
		Recycled:     map[slurmproto.MsgType]*flood.Recycled{},
	}
	msgs := []slurmproto.MsgType{slurmproto.RequestPing, slurmproto.RequestDaemonStatus}
	if o.Stack.UsesMunged() {
		env.Pools = map[slurmproto.MsgType]*flood.Pool{}
	} else {
		env.Minters = map[slurmproto.MsgType]*flood.Minter{}
	}
	for _, t := range msgs {
		if env.Pools != nil {
			env.Pools[t] = flood.NewPool(env.Request(t))
		} else {
			env.Minters[t] = flood.NewMinter(env.Request(t), a)
		}
		frames, err := recycled(ctx, a, env.Request(t))
		if err != nil {
			return nil, err
		}
		env.Recycled[t] = flood.NewRecycled(frames)
	}
	scenarios.RunAll(env, o.Only)
	for _, pool := range env.Pools {
		res.Creds.Left += pool.Len()
	}
	for _, m := range env.Minters {
		res.Creds.Minted += m.Made()
	}
	if err := ctx.Err(); err != nil {
		res.Notes = append(res.Notes, "interrupted: "+err.Error())
	}
	res.Finished = time.Now().UTC().Format(time.RFC3339)
	res.WallSeconds = time.Since(start).Seconds()
	if o.Keep {
		logf("work dir kept: %s (logs: %s)", dir, filepath.Join(dir, "*.log"))
	}
	return res, nil
}

// onlyList is the -only selection, sorted (nil: every scenario).
func onlyList(only map[string]bool) []string {
	var l []string
	for n, on := range only {
		if on {
			l = append(l, n)
		}
	}
	sort.Strings(l)
	return l
}

// stackOf is what results.json records of stack.
func stackOf(s launch.Stack) results.Stack {
	st := results.Stack{Release: s.Release, Auth: s.Auth, Protocol: fmt.Sprintf("0x%04X", s.Protocol()),
		Stock: launch.StockVersion(s), Chroot: s.Root()}
	if !s.UsesMunged() {
		st.KeyBytes = launch.KeyBytes
	}
	return st
}

// stockDesc describes the stock slurmd of stack (version is its `slurmd -V`).
func stockDesc(s launch.Stack, version string) string {
	if s.Release == launch.Release2205 {
		return "Debian's slurmd 22.05 (one thread per connection, at most 256)"
	}
	return fmt.Sprintf("Debian's slurmd %s, in the %s chroot (conmgr accepts every connection, then one thread per connection, at most 256; the rest are retried with back-off)",
		strings.TrimPrefix(version, "slurm-wlm "), s.Release)
}

type limit struct{ name, mode, desc string }

// limitServers are the stack's limit servers: authentication only, and nothing at all.
func limitServers(s launch.Stack) []limit {
	none := limit{results.TargetLimitNone, "noauth", "limit server: canned reply, no authentication: the connection-per-RPC ceiling"}
	if !s.UsesMunged() {
		return []limit{{results.TargetLimitSlurm, "slurm",
			"limit server: verifies the request's auth/slurm token (HS256 signature, expiry, ruid, context) and body hash with the cluster's slurm.key and answers without an auth block, nothing else"}, none}
	}
	return []limit{{results.TargetLimitMunge, "munge", "limit server: decodes the request's credential and encodes the reply's through munged, nothing else"}, none}
}

// clientAuth is the bench's own credential maker for cluster c: a munge client of its private
// munged, or auth/slurm with its slurm.key (tokens for root, readable by anyone, as slurmctld
// makes them for its RPCs to nodes).
func clientAuth(c *launch.Cluster) (auth.Authenticator, error) {
	if c.Stack.UsesMunged() {
		return munge.New(munge.Options{Socket: c.MungeSocket, TTL: -1, MaxInFlight: mungeInFlight})
	}
	keys, _, err := authslurm.LoadKeys(authslurm.LoadOptions{KeyFile: c.KeyPath})
	if err != nil {
		return nil, err
	}
	return authslurm.New(authslurm.Config{Keys: keys, ClusterName: c.Name, Version: func() uint16 { return c.Stack.Protocol() }})
}

// recycled makes the few frames the no-auth limit server is sent over and over.
func recycled(ctx context.Context, a auth.Authenticator, req flood.Request) ([][]byte, error) {
	p := flood.NewPool(req)
	if _, err := p.Fill(ctx, a, recycledFrames, 8); err != nil {
		return nil, err
	}
	var frames [][]byte
	for {
		f, ok := p.Next()
		if !ok {
			return frames, nil
		}
		frames = append(frames, f)
	}
}

// waitQuiet waits up to limit for the 1-minute load average to drop below max. It returns the
// last load average and whether it was below max.
func waitQuiet(ctx context.Context, limit time.Duration, max float64, logf func(string, ...any)) (float64, bool) {
	if max <= 0 {
		max = 1
	}
	deadline := time.Now().Add(limit)
	logged := false
	for {
		load := procstat.LoadAvg1()
		if load < max {
			return load, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			logf("load average %.1f: starting anyway after %v", load, limit)
			return load, false
		}
		if !logged {
			logf("load average %.1f ≥ %.1f: waiting up to %v for the machine to be quiet", load, max, limit)
			logged = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
