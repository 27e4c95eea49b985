//go:build integration

package integration

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Bounds of TestCluster_Zones. They check the harness's own network setup, not our
// daemon's timing, so the margins are wide (2 busy cores, other tests running).
const (
	zoneLatency       = 50 * time.Millisecond // SetZoneLatency; a round trip is >= 2x
	zoneSameMax       = 20 * time.Millisecond // best connect within a zone / to slurmctld
	zoneDialTimeout   = 3 * time.Second       // one connect that must succeed
	zoneBlockedDial   = 2 * time.Second       // one connect that must fail (dropped SYNs)
	zoneBlockedSlack  = 2 * time.Second       // ... returning within zoneBlockedDial plus this
	zoneDialTries     = 5                     // connects per pair; the fastest counts
	zoneStaysTimeout  = time.Minute           // every node hears from slurmctld anew while blocked
	zoneJobTimeout    = time.Minute
	zoneStateTimeout  = time.Minute
	zoneCrossLatency  = 2 * zoneLatency // expected minimum of a cross-zone connect
	zoneLatencyLeeway = 5 * time.Millisecond
)

// TestCluster_Zones: four nodes in two network zones, za = {t1, t3}, zb = {t2, t4}
// (Options.Zones; Slurm 22.05 only: Start fails on a chrooted release). Each node
// daemon, and so its tasks, has its own address; slurmctld and the client commands
// in the root namespace reach every node; nodes reach each other within and across
// zones; SetZoneLatency delays only cross-zone traffic; BlockZones cuts only
// cross-zone traffic, the nodes stay idle (they still hear from slurmctld), and
// BlockZones(false) restores it.
func TestCluster_Zones(t *testing.T) {
	zones := []string{"za", "zb", "za", "zb"}
	// TreeWidth above the node count: slurmctld talks to every node itself. With the
	// default TreeWidth=2, t1 (za) forwards slurmctld's pings to t2 (zb), which
	// BlockZones cuts.
	c := cluster.Start(t, cluster.Options{Nodes: 4, Zones: zones, ExtraConf: []string{"TreeWidth=16"}})
	names := c.NodeNames()
	zoneOf := map[string]string{}
	for i, n := range names {
		zoneOf[n] = zones[i]
	}
	target := func(n string) string {
		return net.JoinHostPort(c.NodeAddr(n), strconv.Itoa(c.Nodes[indexOf(names, n)].Port))
	}
	ctld := net.JoinHostPort(c.CtldAddr(), strconv.Itoa(c.CtldPort))

	t.Run("Addresses", func(t *testing.T) {
		seen := map[string]string{}
		for _, n := range names {
			a := c.NodeAddr(n)
			if ip := net.ParseIP(a); ip == nil || ip.IsLoopback() {
				t.Errorf("NodeAddr(%s) = %q, want a non-loopback address", n, a)
			}
			if o, dup := seen[a]; dup {
				t.Errorf("NodeAddr(%s) = NodeAddr(%s) = %s", n, o, a)
			}
			seen[a] = n
			if got := c.ShowNode(t, n)["NodeAddr"]; got != a {
				t.Errorf("scontrol show node %s: NodeAddr=%q, want %q", n, got, a)
			}
			// REQUEST_DAEMON_STATUS from the root namespace to NodeAddr:Port.
			f := c.ShowSlurmd(t, "", n)
			if f["Slurmd PID"] != strconv.Itoa(c.NodePID(n)) || f["Hostname"] != n {
				t.Errorf("scontrol show slurmd (%s): %v, want PID %d", n, f, c.NodePID(n))
			}
		}
		for i, n := range names {
			for j, m := range names {
				sameZone, sameNet := zoneOf[n] == zoneOf[m], sameSubnet24(c.NodeAddr(n), c.NodeAddr(m))
				if i < j && sameZone != sameNet {
					t.Errorf("%s (%s, %s) and %s (%s, %s): same zone %v, same /24 %v", n, zoneOf[n], c.NodeAddr(n),
						m, zoneOf[m], c.NodeAddr(m), sameZone, sameNet)
				}
			}
		}
	})

	t.Run("Srun", func(t *testing.T) {
		// Every task runs in its node's namespace: its only global address is the node's.
		out := c.MustRun(t, cluster.TestUser, "srun", "-N4", "-n4", "--ntasks-per-node=1",
			"bash", "-c", `echo "$SLURMD_NODENAME $(hostname -I)"`)
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 1 {
				got[f[0]] = strings.Join(f[1:], " ")
			}
		}
		for _, n := range names {
			if got[n] != c.NodeAddr(n) {
				t.Errorf("srun task on %s: hostname -I = %q, want %q (all output %q)", n, got[n], c.NodeAddr(n), out)
			}
		}
	})

	t.Run("Sbatch", func(t *testing.T) {
		dir := c.WorkDir(t, cluster.TestUser, "zones")
		outFile := dir + "/t4.out"
		id := c.SbatchIn(t, cluster.TestUser, dir, "#!/bin/bash\nhostname -I\n", "-w", "t4", "-o", outFile)
		c.WaitJob(t, id, zoneJobTimeout, "COMPLETED")
		if got := strings.TrimSpace(readFile(t, outFile)); got != c.NodeAddr("t4") {
			t.Errorf("batch job on t4: hostname -I = %q, want %q", got, c.NodeAddr("t4"))
		}
	})

	// best is the fastest of zoneDialTries connects from → to, failing on any error.
	best := func(t *testing.T, from, to string) time.Duration {
		t.Helper()
		var min time.Duration
		for i := 0; i < zoneDialTries; i++ {
			d, err := c.DialFrom(t, from, to, zoneDialTimeout)
			if err != nil {
				t.Fatalf("connect %s -> %s: %v", from, to, err)
			}
			if i == 0 || d < min {
				min = d
			}
		}
		return min
	}
	// allPairs connects from every node to every other node and to slurmctld; it
	// returns the best connect times by kind.
	allPairs := func(t *testing.T) (same, cross, toCtld []time.Duration) {
		t.Helper()
		for _, n := range names {
			for _, m := range names {
				if n == m {
					continue
				}
				d := best(t, n, target(m))
				t.Logf("%s (%s) -> %s (%s): %v", n, zoneOf[n], m, zoneOf[m], d)
				if zoneOf[n] == zoneOf[m] {
					same = append(same, d)
				} else {
					cross = append(cross, d)
				}
			}
			d := best(t, n, ctld)
			t.Logf("%s (%s) -> slurmctld %s: %v", n, zoneOf[n], ctld, d)
			toCtld = append(toCtld, d)
		}
		return same, cross, toCtld
	}
	atMost := func(t *testing.T, what string, ds []time.Duration, max time.Duration) {
		t.Helper()
		for _, d := range ds {
			if d >= max {
				t.Errorf("%s: best connect %v, want < %v (all %v)", what, d, max, ds)
				return
			}
		}
	}

	t.Run("Reachable", func(t *testing.T) {
		same, cross, toCtld := allPairs(t)
		atMost(t, "same zone", same, zoneSameMax)
		atMost(t, "cross zone without latency", cross, zoneSameMax)
		atMost(t, "node -> slurmctld", toCtld, zoneSameMax)
	})

	t.Run("Latency", func(t *testing.T) {
		c.SetZoneLatency(t, zoneLatency)
		same, cross, toCtld := allPairs(t)
		for _, d := range cross {
			if d < zoneCrossLatency-zoneLatencyLeeway {
				t.Errorf("cross zone with SetZoneLatency(%v): connect %v, want >= %v (all %v)", zoneLatency, d, zoneCrossLatency, cross)
				break
			}
		}
		atMost(t, "same zone with latency", same, zoneSameMax)
		atMost(t, "node -> slurmctld with latency", toCtld, zoneSameMax)
		// Slurm across the delayed links still works (slurmctld itself is not delayed).
		c.MustRun(t, cluster.TestUser, "srun", "-N4", "true")
		c.SetZoneLatency(t, 0)
		_, cross, _ = allPairs(t)
		atMost(t, "cross zone after SetZoneLatency(0)", cross, zoneSameMax)
	})

	t.Run("Block", func(t *testing.T) {
		before := map[string]string{}
		for _, n := range names {
			before[n] = c.ShowSlurmd(t, "", n)["Last slurmctld msg time"]
		}
		c.BlockZones(t, true)
		blocked := true
		defer func() {
			if blocked {
				c.BlockZones(t, false)
			}
		}()
		for _, n := range names {
			for _, m := range names {
				if n == m || zoneOf[n] == zoneOf[m] {
					continue
				}
				start := time.Now()
				_, err := c.DialFrom(t, n, target(m), zoneBlockedDial)
				took := time.Since(start)
				if err == nil {
					t.Errorf("blocked: %s (%s) -> %s (%s) connected", n, zoneOf[n], m, zoneOf[m])
				} else if took > zoneBlockedDial+zoneBlockedSlack {
					t.Errorf("blocked: %s -> %s failed only after %v: %v", n, m, took, err)
				} else {
					t.Logf("blocked: %s (%s) -> %s (%s): %v after %v", n, zoneOf[n], m, zoneOf[m], err, took.Round(time.Millisecond))
				}
			}
		}
		for _, n := range names {
			for _, m := range names {
				if n != m && zoneOf[n] == zoneOf[m] {
					t.Logf("blocked: %s -> %s (same zone): %v", n, m, best(t, n, target(m)))
				}
			}
			t.Logf("blocked: %s -> slurmctld: %v", n, best(t, n, ctld))
		}
		// slurmctld still reaches every node: each hears from it anew (a ping or a
		// registration request) and all stay idle meanwhile.
		c.WaitFor(t, "every node hears from slurmctld while zones are blocked", zoneStaysTimeout, func() (bool, string) {
			st, err := c.NodeStates(t)
			if err != nil {
				return false, err.Error()
			}
			var waiting []string
			for _, n := range names {
				if st[n] != "idle" {
					t.Fatalf("blocked: node %s is %q, want idle (all %v)", n, st[n], st)
				}
				if v := c.ShowSlurmd(t, "", n)["Last slurmctld msg time"]; v == before[n] || v == "NONE" {
					waiting = append(waiting, n)
				}
			}
			return len(waiting) == 0, fmt.Sprintf("no new slurmctld message yet on %v", waiting)
		})
		c.MustRun(t, cluster.TestUser, "srun", "-N4", "true") // srun -> every node, from the root namespace
		c.BlockZones(t, false)
		blocked = false
		_, cross, _ := allPairs(t)
		atMost(t, "cross zone after BlockZones(false)", cross, zoneSameMax)
		c.WaitNodes(t, "idle", names, zoneStateTimeout)
	})
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// sameSubnet24 reports whether two IPv4 addresses share their first three octets.
func sameSubnet24(a, b string) bool {
	x, y := net.ParseIP(a).To4(), net.ParseIP(b).To4()
	return x != nil && y != nil && x[0] == y[0] && x[1] == y[1] && x[2] == y[2]
}
