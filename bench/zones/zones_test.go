//go:build integration

package zones

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/report"
	"github.com/tiee-hpc/tiee/bench/internal/results"
	"github.com/tiee-hpc/tiee/bench/internal/ring"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

var (
	profileFlag = flag.String("profile", "full", "full or smoke")
	outFlag     = flag.String("out", "", "results directory, relative to the repository (default bench/results/zones, smoke: bench/results/smoke-zones)")
	rfcFlag     = flag.String("rfc", "", "refresh the RFC's zones block in this directory, relative to the repository (e.g. rfc)")
)

// profile is what one run measures.
type profile struct {
	bytes, warmup, iters int
	delays               []time.Duration // added to each packet between zones, each way
	connectTimeout       time.Duration   // the all-reduce's own bound on reaching a peer
}

var profiles = map[string]profile{
	// 16 MiB: a gradient bucket of the order data-parallel trainers all-reduce per step.
	"full": {bytes: 16 << 20, warmup: 3, iters: 30, connectTimeout: 120 * time.Second,
		delays: []time.Duration{0, 250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
			2500 * time.Microsecond, 5 * time.Millisecond}},
	"smoke": {bytes: 1 << 20, warmup: 1, iters: 3, connectTimeout: 10 * time.Second,
		delays: []time.Duration{0, time.Millisecond}},
}

// Named bounds.
const (
	ranks = 4
	// failBound is issue 15's bound on a blocked straddling job with the plugin.
	failBound = 30 * time.Second
	// probeTimeout is the plugin's bound on one reachability probe (plugstack probe_timeout=).
	probeTimeout = 3 * time.Second
	// nodesIdleTimeout bounds the six daemons' registration on a loaded machine.
	nodesIdleTimeout = 2 * time.Minute
	// stepJobTimeout bounds one job of warmup+iters steps (seconds per step at most).
	stepJobTimeout = 3 * time.Minute
	// rttDial bounds one connect of the RTT probe; rttSamples are taken, the median kept.
	rttDial    = 5 * time.Second
	rttSamples = 7
	// buildTimeout bounds go build of the all-reduce.
	buildTimeout = 3 * time.Minute
	// tasksGoneTimeout bounds the wait for a failed job's tasks to be gone.
	tasksGoneTimeout = 30 * time.Second
)

// zoneOf: za = nodes 1, 3, 5, 6; zb = nodes 2, 4. slurmctld's own pick of 4 nodes
// (n1..n4) then straddles, interleaved, while za alone has 4 nodes.
var zoneOf = []string{"za", "zb", "za", "zb", "za", "za"}

func TestZoneBench(t *testing.T) {
	p, ok := profiles[*profileFlag]
	if !ok {
		t.Fatalf("-profile %q: want full or smoke", *profileFlag)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := *outFlag
	if out == "" {
		out = map[string]string{"full": "bench/results/zones", "smoke": "bench/results/smoke-zones"}[*profileFlag]
	}
	started := time.Now()
	so := cluster.BuildSpankPlugin(t, "", filepath.Join(root, "spank", "topology", "tiee_topology.c"))
	lua, err := os.ReadFile(filepath.Join(root, "spank", "topology", "job_submit.lua"))
	if err != nil {
		t.Fatal(err)
	}
	o := cluster.Options{Impl: cluster.ImplGo, NodePrefix: cluster.RandomNodePrefix(), Nodes: len(zoneOf), Zones: zoneOf,
		JobSubmitLua: string(lua),
		ExtraConf:    []string{"TopologyPlugin=topology/tree", "JobSubmitPlugins=lua", "TreeWidth=65533"},
		PlugStack:    "# set once the cluster's directory is known\n"}
	byZone := map[string][]string{}
	var nodes []string
	for i, z := range zoneOf {
		n := fmt.Sprintf("%s%d", o.NodePrefix, i+1)
		nodes = append(nodes, n)
		byZone[z] = append(byZone[z], n)
	}
	o.TopologyConf = []string{"SwitchName=za Nodes=" + hostlist.Compress(byZone["za"]),
		"SwitchName=zb Nodes=" + hostlist.Compress(byZone["zb"]), "SwitchName=top Switches=za,zb"}
	c := cluster.Start(t, o)
	plug := fmt.Sprintf("required %s probe=all probe_timeout=%d socket=%s/spool/%%n/tiee-topology.sock\n", so, int(probeTimeout.Seconds()), c.Dir)
	c.SetPlugStack(t, plug)
	c.WaitNodes(t, "idle", nodes, nodesIdleTimeout)

	work := c.WorkDir(t, cluster.TestUser, "zonebench")
	bin := filepath.Join(work, "allreduce")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/cmd/allreduce")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build allreduce: %v\n%s", err, b)
	}
	var addrs []string
	zoneByNode := map[string]string{}
	for i, n := range nodes {
		addrs = append(addrs, n+"="+c.NodeAddr(n))
		zoneByNode[n] = zoneOf[i]
	}
	z := &results.Zones{Schema: results.ZonesSchemaVersion, Profile: *profileFlag, Started: started.UTC().Format(time.RFC3339),
		Release: "22.05", Machine: launch.DescribeMachine(root, launch.Stack{Release: "22.05", Auth: "munge"}),
		Config: results.ZonesConfig{Nodes: nodes, Zones: zoneOf, Ranks: ranks, Bytes: p.bytes, Warmup: p.warmup, Iters: p.iters,
			DelayModel:      "each packet routed between the zones' subnets is held by a netfilter queue (nfnetlink_queue, GSO packets whole) in the test binary for the delay, each way; traffic within a zone is bridged, undelayed",
			ConnectTimeoutS: p.connectTimeout.Seconds(), ProbeTimeoutS: probeTimeout.Seconds(), FailBoundS: failBound.Seconds()}}

	for _, d := range p.delays {
		z.Config.DelaysMS = append(z.Config.DelaysMS, ms(d))
	}
	runs := 0
	// srun runs the all-reduce as the test user on 4 nodes, one task each.
	srun := func(connect time.Duration, args ...string) (cluster.Result, time.Duration) {
		t.Helper()
		runs++
		rv := c.WorkDir(t, cluster.TestUser, "zonebench", fmt.Sprintf("rv%d", runs))
		argv := append([]string{"srun", "-N", strconv.Itoa(ranks), "--ntasks-per-node=1"}, args...)
		argv = append(argv, bin, "-bytes", strconv.Itoa(p.bytes), "-warmup", strconv.Itoa(p.warmup), "-iters", strconv.Itoa(p.iters),
			"-rendezvous", rv, "-node-addrs", strings.Join(addrs, ","), "-connect-timeout", connect.String())
		start := time.Now()
		r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{User: cluster.TestUser, Dir: work, Args: argv}, Timeout: stepJobTimeout + connect})
		return r, time.Since(start)
	}
	step := func(placement string, delay time.Duration, rtt float64, args ...string) {
		t.Helper()
		r, _ := srun(p.connectTimeout, args...)
		var line ring.Line
		if r.ExitCode != 0 || json.Unmarshal([]byte(lastLine(r.Stdout)), &line) != nil || !line.OK || len(line.StepsS) != p.iters {
			t.Fatalf("%s at %v: %v\nstdout: %s\nstderr: %s", placement, delay, r, r.Stdout, r.Stderr)
		}
		s := results.ZoneStep{Placement: placement, DelayMS: ms(delay), RTTms: rtt, Nodes: line.Nodes,
			StepsS: line.StepsS, MedianS: line.MedianS, MinS: line.MinS, MaxS: line.MaxS}
		for _, n := range line.Nodes {
			s.Zones = append(s.Zones, zoneByNode[n])
		}
		if zs := slices.Compact(slices.Sorted(slices.Values(s.Zones))); (placement == results.PlacementOneZone) != (len(zs) == 1) {
			t.Fatalf("%s at %v ran on %v (zones %v)", placement, delay, line.Nodes, zs)
		}
		z.Steps = append(z.Steps, s)
		t.Logf("%-9s delay %-6v rtt %6.2f ms: median %.4f s (min %.4f, max %.4f) on %v", placement, delay, rtt, s.MedianS, s.MinS, s.MaxS, line.Nodes)
	}
	straddle := []string{"-w", strings.Join(nodes[:ranks], ",")} // slurmctld's own pick without the option
	for _, d := range p.delays {
		c.SetZoneLatency(t, d)
		rtt := medianRTT(t, c, nodes[0], net.JoinHostPort(c.NodeAddr(nodes[1]), strconv.Itoa(c.Nodes[1].Port)))
		step(results.PlacementOneZone, d, 0, "--topology=zone")
		step(results.PlacementTwoZones, d, rtt, straddle...)
	}
	c.SetZoneLatency(t, 0)

	// Hard block: the zones drop each other's packets.
	c.BlockZones(t, true)
	block := func(plugin bool) {
		t.Helper()
		if !plugin {
			c.SetPlugStack(t, "")
			defer c.SetPlugStack(t, plug)
		}
		r, held := srun(p.connectTimeout, straddle...)
		b := results.ZoneBlock{Plugin: plugin, HeldS: held.Seconds(), ExitCode: r.ExitCode, Nodes: nodes[:ranks]}
		want := "allreduce: rank" // the all-reduce's own failure
		if plugin {
			want = "tiee-topology: job" // the plugin's, before any task starts
		}
		b.Message = lineWith(r.Stderr, want)
		if b.Message == "" || !strings.Contains(b.Message, "cannot reach") || strings.Contains(r.Stdout, `"ok":true`) {
			t.Fatalf("blocked zones, plugin %v: the job did not fail as expected (want %q ... cannot reach): %v\nstdout: %s\nstderr: %s", plugin, want, r, r.Stdout, r.Stderr)
		}
		c.WaitFor(t, "the failed job's tasks gone", tasksGoneTimeout, func() (bool, string) {
			n := countProcs(bin)
			b.TasksLeft = n
			return n == 0, fmt.Sprintf("%d all-reduce processes", n)
		})
		z.Block = append(z.Block, b)
		t.Logf("blocked zones, plugin %v: held %.1f s, srun exit %d: %s", plugin, b.HeldS, b.ExitCode, b.Message)
	}
	block(true)
	block(false)
	c.BlockZones(t, false)

	z.Finished = time.Now().UTC().Format(time.RFC3339)
	z.WallSeconds = time.Since(started).Seconds()
	dir := filepath.Join(root, out)
	rfc := ""
	if *rfcFlag != "" {
		rfc = filepath.Join(root, *rfcFlag)
	}
	if err := report.WriteZones(z, dir, rfc); err != nil {
		t.Fatal(err)
	}
	t.Logf("results in %s", dir)
}

// medianRTT is the median connect time from node to addr over rttSamples, in ms.
func medianRTT(t *testing.T, c *cluster.Cluster, node, addr string) float64 {
	t.Helper()
	var xs []float64
	for i := 0; i < rttSamples; i++ {
		d, err := c.DialFrom(t, node, addr, rttDial)
		if err != nil {
			t.Fatalf("RTT probe %s -> %s: %v", node, addr, err)
		}
		xs = append(xs, ms(d))
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// lineWith is the first line of s containing sub, trimmed ("" if none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// countProcs is how many processes run exe.
func countProcs(exe string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if p, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && p == exe {
			n++
		}
	}
	return n
}
