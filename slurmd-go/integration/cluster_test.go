//go:build integration

// Issue "slurmd-go joins an unmodified Slurm 22.05 cluster": the node daemon under
// test (TIEE_SLURMD_IMPL=go|stock) must look to slurmctld and to the client commands
// exactly like the stock slurmd. Two clusters, each serving several subtests:
// TestCluster_Steady never disturbs its cluster; TestCluster_Disrupt restarts
// slurmctld, kills a node daemon and adds a dynamic node.
package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named bounds of the waits in this file (the harness has its own).
const (
	// Configured TmpDisk: below the size of /tmp, so the node validates, and visible
	// in `scontrol show node` (slurmctld shows the configured value, not the reported).
	cfgTmpDisk = 64

	// BootTime = now - reported up_time, computed by slurmctld; whole seconds.
	bootTimeSlack = 5 * time.Second
	// Start times are printed in whole seconds.
	startTimeSlack = 2 * time.Second

	statePollInterval   = 500 * time.Millisecond
	slurmdPollInterval  = 1 * time.Second
	reconfigureTimeout  = 20 * time.Second
	ctldContactTimeout  = 30 * time.Second // new slurmctld has talked to every slurmd
	nodeBackIdleTimeout = 30 * time.Second // after ctld restart / node restart
	dynamicNodeTimeout  = 30 * time.Second
)

func TestCluster_Steady(t *testing.T) {
	c := cluster.Start(t, cluster.Options{NodeExtra: fmt.Sprintf("TmpDisk=%d", cfgTmpDisk)})

	t.Run("NodesIdle", func(t *testing.T) { testNodesIdle(t, c) })
	t.Run("NodeHardware", func(t *testing.T) { testNodeHardware(t, c) })
	t.Run("ShowSlurmd", func(t *testing.T) { testShowSlurmd(t, c) })
	t.Run("AsOrdinaryUser", func(t *testing.T) { testAsOrdinaryUser(t, c) })
	t.Run("StaysUpAcrossPings", func(t *testing.T) { testStaysUpAcrossPings(t, c) })
	t.Run("SetDebug", func(t *testing.T) { testSetDebug(t, c) })
	t.Run("Reconfigure", func(t *testing.T) { testReconfigure(t, c) }) // changes slurm.conf: last
}

func TestCluster_Disrupt(t *testing.T) {
	// A healthy node is skipped by ping rounds for SlurmdTimeout/3 after it answers,
	// and a round that includes a dead node lasts ~MessageTimeout+2 s (7 s), so it may
	// go SlurmdTimeout/3+7 s unpinged; slurmctld sets it DOWN once that exceeds
	// SlurmdTimeout (ping_nodes.c), and at 8 s only the race with slurmctld's async
	// node-update thread saved it. 15 s leaves 3 s.
	c := cluster.Start(t, cluster.Options{SlurmdTimeout: 15})

	t.Run("CtldRestart", func(t *testing.T) { testCtldRestart(t, c) })
	t.Run("KillOneNode", func(t *testing.T) { testKillOneNode(t, c) })
	t.Run("DynamicNode", func(t *testing.T) { testDynamicNode(t, c) })
}

// testNodesIdle: sinfo shows exactly the configured nodes, all idle, in the default
// partition.
func testNodesIdle(t *testing.T, c *cluster.Cluster) {
	out := c.MustRun(t, "", "sinfo", "-h", "-N", "-o", "%N %T")
	st := cluster.ParseSinfoStates(out)
	if len(st) != len(c.Nodes) {
		t.Errorf("sinfo lists %d nodes, want %d:\n%s", len(st), len(c.Nodes), out)
	}
	for _, n := range c.NodeNames() {
		if st[n] != "idle" {
			t.Errorf("node %s state %q, want idle (sinfo:\n%s)", n, st[n], out)
		}
	}
	sum := strings.TrimSpace(c.MustRun(t, "", "sinfo", "-h", "-o", "%P %a %D %T"))
	if want := fmt.Sprintf("debug* up %d idle", len(c.Nodes)); sum != want {
		t.Errorf("sinfo summary %q, want %q", sum, want)
	}
}

// testNodeHardware: what each daemon reported in its registration, as slurmctld shows it.
func testNodeHardware(t *testing.T, c *cluster.Cluster) {
	wantOS, wantArch := unameOS(t)
	boot := hostBootTime(t)
	for _, n := range c.Nodes {
		f := c.ShowNode(t, n.Name)
		check := func(key, want string) {
			t.Helper()
			if f[key] != want {
				t.Errorf("%s: %s=%q, want %q", n.Name, key, f[key], want)
			}
		}
		check("NodeName", n.Name)
		check("State", "IDLE")
		check("CPUTot", strconv.Itoa(c.HW.CPUs))
		check("CPUEfctv", strconv.Itoa(c.HW.CPUs))
		check("Boards", strconv.Itoa(c.HW.Boards))
		check("Sockets", strconv.Itoa(c.HW.Boards*c.HW.SocketsPerBoard))
		check("CoresPerSocket", strconv.Itoa(c.HW.CoresPerSocket))
		check("ThreadsPerCore", strconv.Itoa(c.HW.ThreadsPerCore))
		check("RealMemory", strconv.FormatUint(c.HW.RealMemory, 10))
		check("TmpDisk", strconv.Itoa(cfgTmpDisk))
		check("NodeAddr", "127.0.0.1")
		check("Port", strconv.Itoa(n.Port))
		check("Version", c.StockVersion)
		check("OS", wantOS)
		check("Arch", wantArch)
		if f["Reason"] != "" {
			t.Errorf("%s: Reason=%q, want none", n.Name, f["Reason"])
		}
		// FreeMem comes from the registration / ping replies, in MiB.
		if free, err := strconv.ParseUint(f["FreeMem"], 10, 64); err != nil || free == 0 || free > c.HW.RealMemory {
			t.Errorf("%s: FreeMem=%q, want 0 < FreeMem <= %d", n.Name, f["FreeMem"], c.HW.RealMemory)
		}
		// BootTime is slurmctld's now - reported up_time: must be the host's boot.
		if bt, err := cluster.ParseSlurmTime(f["BootTime"]); err != nil {
			t.Errorf("%s: BootTime=%q: %v", n.Name, f["BootTime"], err)
		} else if d := bt.Sub(boot); d < -bootTimeSlack || d > bootTimeSlack {
			t.Errorf("%s: BootTime=%s, host booted %s (off by %v)", n.Name, f["BootTime"], boot.Format(cluster.SlurmTimeLayout), d)
		}
		// SlurmdStartTime is the daemon's own start.
		if st, err := cluster.ParseSlurmTime(f["SlurmdStartTime"]); err != nil {
			t.Errorf("%s: SlurmdStartTime=%q: %v", n.Name, f["SlurmdStartTime"], err)
		} else if started := c.NodeStarted(n.Name); st.Before(started.Add(-startTimeSlack)) || st.After(time.Now().Add(startTimeSlack)) {
			t.Errorf("%s: SlurmdStartTime=%s, daemon started %s", n.Name, f["SlurmdStartTime"], started.Format(cluster.SlurmTimeLayout))
		}
		if want := fmt.Sprintf("cpu=%d,mem=%dM", c.HW.CPUs, c.HW.RealMemory); !strings.HasPrefix(f["CfgTRES"], want) {
			t.Errorf("%s: CfgTRES=%q, want prefix %q", n.Name, f["CfgTRES"], want)
		}
	}
}

// testShowSlurmd: `scontrol show slurmd` is REQUEST_DAEMON_STATUS straight to one
// slurmd. Debian's Slurm is built with MULTIPLE_SLURMD, so scontrol sends it to the
// NodeAddr:Port of $SLURMD_NODENAME (without it: localhost:SlurmdPort; the hostname is
// never used). Any user may ask.
func testShowSlurmd(t *testing.T, c *cluster.Cluster) {
	tmpMB := tmpDiskMB(t)
	for _, n := range c.NodeNames() {
		f := c.ShowSlurmd(t, "", n)
		check := func(key, want string) {
			t.Helper()
			if f[key] != want {
				t.Errorf("%s: %q = %q, want %q", n, key, f[key], want)
			}
		}
		check("Slurmd PID", strconv.Itoa(c.NodePID(n)))
		check("Hostname", n) // slurmd reports its NodeName here, not gethostname()
		check("Version", c.StockVersion)
		check("Slurmd Logfile", c.NodeLog(n))
		check("Slurmd Debug", "6") // harness default SlurmdDebug=debug2 = LOG_LEVEL_DEBUG2
		check("Active Steps", "NONE")
		check("Actual CPUs", strconv.Itoa(c.HW.CPUs))
		check("Actual Boards", strconv.Itoa(c.HW.Boards))
		check("Actual sockets", strconv.Itoa(c.HW.Boards*c.HW.SocketsPerBoard))
		check("Actual cores", strconv.Itoa(c.HW.CoresPerSocket))
		check("Actual threads per core", strconv.Itoa(c.HW.ThreadsPerCore))
		check("Actual real memory", fmt.Sprintf("%d MB", c.HW.RealMemory))
		check("Actual temp disk space", fmt.Sprintf("%d MB", tmpMB)) // statvfs(TmpFS=/tmp)
		// "Boot time" is the slurmd's start time, not the host's.
		if bt, err := cluster.ParseSlurmTime(f["Boot time"]); err != nil {
			t.Errorf("%s: Boot time %q: %v", n, f["Boot time"], err)
		} else if started := c.NodeStarted(n); bt.Before(started.Add(-startTimeSlack)) || bt.After(time.Now()) {
			t.Errorf("%s: Boot time %s, daemon started %s", n, f["Boot time"], started.Format(cluster.SlurmTimeLayout))
		}
		if v := f["Last slurmctld msg time"]; v != "NONE" {
			if _, err := cluster.ParseSlurmTime(v); err != nil {
				t.Errorf("%s: Last slurmctld msg time %q: want NONE or a time", n, v)
			}
		}
	}
}

// testAsOrdinaryUser: the client commands work for a non-root user.
func testAsOrdinaryUser(t *testing.T, c *cluster.Cluster) {
	u := cluster.TestUser
	if id := strings.TrimSpace(c.MustRun(t, u, "id", "-u")); id == "0" || id == "" {
		t.Fatalf("Run as %s runs as uid %q", u, id)
	}
	st := cluster.ParseSinfoStates(c.MustRun(t, u, "sinfo", "-h", "-N", "-o", "%N %T"))
	for _, n := range c.NodeNames() {
		if st[n] != "idle" {
			t.Errorf("as %s: sinfo: %s is %q, want idle", u, n, st[n])
		}
	}
	out := c.MustRun(t, u, "scontrol", "show", "node", "t1")
	if f := cluster.ParseShowNode(out); f["State"] != "IDLE" || f["Version"] != c.StockVersion {
		t.Errorf("as %s: scontrol show node t1: State=%q Version=%q:\n%s", u, f["State"], f["Version"], out)
	}
	f := c.ShowSlurmd(t, u, "t3")
	if f["Slurmd PID"] != strconv.Itoa(c.NodePID("t3")) || f["Hostname"] != "t3" {
		t.Errorf("as %s: scontrol show slurmd (t3): %v", u, f)
	}
}

// testStaysUpAcrossPings: for longer than SlurmdTimeout plus several ping intervals,
// every node stays plain "idle" (never idle*, down*, ...), and every slurmd sees at
// least two new slurmctld messages (REQUEST_PING / REQUEST_NODE_REGISTRATION_STATUS;
// t2 and t3 get them through t1 whenever a round covers all four nodes): its
// "Last slurmctld msg time" in `scontrol show slurmd` advances.
func testStaysUpAcrossPings(t *testing.T, c *cluster.Cluster) {
	window := c.SlurmdTimeout + 3*c.PingInterval + 2*time.Second
	const wantNewMsgs = 2
	seen := map[string]map[string]bool{} // node -> distinct non-NONE last-msg times
	first := map[string]string{}
	for _, n := range c.NodeNames() {
		seen[n] = map[string]bool{}
		first[n] = c.ShowSlurmd(t, "", n)["Last slurmctld msg time"]
	}
	t.Logf("watching %v for %v (SlurmdTimeout %v, ping interval %v)", c.NodeNames(), window, c.SlurmdTimeout, c.PingInterval)
	deadline := time.Now().Add(window)
	nextSlurmd := time.Now()
	for time.Now().Before(deadline) {
		st, err := c.NodeStates(t)
		if err != nil {
			t.Fatalf("sinfo: %v", err)
		}
		for _, n := range c.NodeNames() {
			if st[n] != "idle" {
				t.Fatalf("node %s is %q (want idle throughout); all: %v; scontrol: %v", n, st[n], st, c.ShowNode(t, n))
			}
		}
		if time.Now().After(nextSlurmd) {
			for _, n := range c.NodeNames() {
				if v := c.ShowSlurmd(t, "", n)["Last slurmctld msg time"]; v != "NONE" && v != first[n] {
					seen[n][v] = true
				}
			}
			nextSlurmd = time.Now().Add(slurmdPollInterval)
		}
		time.Sleep(statePollInterval)
	}
	// A node is in at most one agent per ping round and rounds are >= PingInterval
	// apart; nothing else comes from slurmctld while idle. More values mean the daemon
	// also counts other RPCs (stock does not count REQUEST_DAEMON_STATUS, which this
	// loop sends every second).
	maxNewMsgs := int(window/c.PingInterval) + 1
	for _, n := range c.NodeNames() {
		t.Logf("%s: %d new slurmctld messages seen in %v", n, len(seen[n]), window)
		if len(seen[n]) < wantNewMsgs {
			t.Errorf("%s: saw %d new 'Last slurmctld msg time' values in %v (%v), want >= %d: slurmctld is not pinging it",
				n, len(seen[n]), window, keys(seen[n]), wantNewMsgs)
		}
		if len(seen[n]) > maxNewMsgs {
			t.Errorf("%s: saw %d new 'Last slurmctld msg time' values in %v, want <= %d: only RPCs from slurmctld "+
				"(REQUEST_PING, REQUEST_NODE_REGISTRATION_STATUS, REQUEST_RECONFIGURE, job RPCs) may set it, not "+
				"`scontrol show slurmd` (req.c:296-370)", n, len(seen[n]), window, maxNewMsgs)
		}
	}
}

// testReconfigure: change SlurmdDebug in slurm.conf (debug2 -> debug), `scontrol
// reconfigure` (REQUEST_RECONFIGURE, no reply; t1 forwards it to t2 and t3): every
// slurmd (reached through the TreeWidth=2 tree) re-reads slurm.conf, visible as its
// new "Slurmd Debug"; the daemons are not restarted and the nodes stay idle.
func testReconfigure(t *testing.T, c *cluster.Cluster) {
	pids := map[string]int{}
	for _, n := range c.NodeNames() {
		pids[n] = c.NodePID(n)
		if got := c.ShowSlurmd(t, "", n)["Slurmd Debug"]; got != "6" {
			t.Fatalf("%s: Slurmd Debug %q before reconfigure, want 6 (debug2)", n, got)
		}
	}
	c.SetConf(t, "SlurmdDebug=debug")
	asked := time.Now().Truncate(time.Second)
	c.MustRun(t, "", "scontrol", "reconfigure")
	for _, n := range c.NodeNames() {
		c.WaitFor(t, n+" applies SlurmdDebug=debug (5)", reconfigureTimeout, func() (bool, string) {
			f, err := c.ShowSlurmdErr(t, "", n)
			if err != nil {
				return false, err.Error()
			}
			return f["Slurmd Debug"] == "5", fmt.Sprintf("Slurmd Debug=%q", f["Slurmd Debug"])
		})
		if factsOf(t, c).reconfigureReexec {
			// The re-executed slurmd shows NONE until slurmctld's next RPC to it, a
			// ping within a few ping intervals; 22.05 shows the reconfigure's own
			// time at once.
			c.WaitFor(t, n+" hears from slurmctld after the reconfigure", reconfigureTimeout, func() (bool, string) {
				f, err := c.ShowSlurmdErr(t, "", n)
				if err != nil {
					return false, err.Error()
				}
				last, err := cluster.ParseSlurmTime(f["Last slurmctld msg time"])
				return err == nil && !last.Before(asked), "Last slurmctld msg time=" + f["Last slurmctld msg time"]
			})
		} else if last, err := cluster.ParseSlurmTime(c.ShowSlurmd(t, "", n)["Last slurmctld msg time"]); err != nil || last.Before(asked) {
			t.Errorf("%s: Last slurmctld msg time %v (err %v) before the reconfigure at %v", n, last, err, asked)
		}
		if c.NodePID(n) != pids[n] || !c.NodeRunning(n) {
			t.Errorf("%s: daemon restarted or gone (pid %d -> %d, running %v)", n, pids[n], c.NodePID(n), c.NodeRunning(n))
		}
	}
	// Still idle after the re-registrations and the next pings.
	holdIdle(t, c, c.NodeNames(), settle(c))
}

// testCtldRestart: restart slurmctld (same StateSaveLocation); without touching the
// slurmds, every node is idle again and the new slurmctld has talked to every slurmd
// (its first RPCs to them use the 20.11 header, 0x2400).
func testCtldRestart(t *testing.T, c *cluster.Cluster) {
	c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)
	pids := map[string]int{}
	startTimes := map[string]string{}
	for _, n := range c.NodeNames() {
		pids[n] = c.NodePID(n)
		startTimes[n] = c.ShowNode(t, n)["SlurmdStartTime"]
	}
	oldCtld := c.CtldPID()
	restarted := time.Now().Truncate(time.Second)
	c.RestartCtld(t)
	if c.CtldPID() == oldCtld {
		t.Fatalf("slurmctld pid unchanged")
	}
	// The restored node records are UNKNOWN (FreeMem N/A) until the slurmd answers the
	// new slurmctld's REQUEST_NODE_REGISTRATION_STATUS and registers.
	if st, err := c.NodeStates(t); err == nil {
		t.Logf("states right after the restart: %v", st)
	}
	c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)
	t.Logf("nodes idle %v after the restart began", time.Since(restarted).Round(time.Second))
	for _, n := range c.NodeNames() {
		c.WaitFor(t, "new slurmctld contacts "+n, ctldContactTimeout, func() (bool, string) {
			f, err := c.ShowSlurmdErr(t, "", n)
			if err != nil {
				return false, err.Error()
			}
			last, err := cluster.ParseSlurmTime(f["Last slurmctld msg time"])
			return err == nil && !last.Before(restarted), "Last slurmctld msg time=" + f["Last slurmctld msg time"]
		})
		if c.NodePID(n) != pids[n] || !c.NodeRunning(n) {
			t.Errorf("%s: daemon restarted or gone", n)
		}
		if got := c.ShowNode(t, n)["SlurmdStartTime"]; got != startTimes[n] {
			t.Errorf("%s: SlurmdStartTime %q -> %q: slurmd must not restart", n, startTimes[n], got)
		}
	}
	t.Logf("every slurmd contacted %v after the restart began", time.Since(restarted).Round(time.Second))
	holdIdle(t, c, c.NodeNames(), settle(c))
}

// testKillOneNode: SIGKILL the slurmd of t2, a forwarding child (TreeWidth=2: a ping
// round for t[1-4] goes to t1, which forwards to t2 and t3; a round for t[2-4] goes to
// t2 itself): t2 goes idle* (NOT_RESPONDING) and
// then DOWN "Not responding" within a bounded time while t1, t3, t4 stay idle; restarted,
// t2 returns to idle by itself (ReturnToService=2).
func testKillOneNode(t *testing.T, c *cluster.Cluster) {
	const victim = "t2"
	// Not responding is noticed at the next ping of t2, ~MessageTimeout+1 s later
	// (slurmctld retries the refused connect once a second). DOWN comes at the first
	// ping round whose predecessor started SlurmdTimeout after t2's last response;
	// every round that includes the dead node lasts ~MessageTimeout+1 s. Stock:
	// idle* after 3-10 s, DOWN after 14-19 s (SlurmdTimeout 8, MessageTimeout 5).
	downTimeout := c.SlurmdTimeout + 3*(c.MessageTimeout+c.PingInterval) + 5*time.Second
	c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)
	var others []string
	for _, n := range c.NodeNames() {
		if n != victim {
			others = append(others, n)
		}
	}
	killed := time.Now()
	c.KillNode(t, victim, syscall.SIGKILL)
	var notResponding time.Duration
	c.WaitFor(t, victim+" DOWN while the others stay idle", downTimeout, func() (bool, string) {
		st, err := c.NodeStates(t)
		if err != nil {
			return false, err.Error()
		}
		for _, n := range others {
			if st[n] != "idle" {
				t.Fatalf("%s is %q after %s was killed, want idle; all: %v", n, st[n], victim, st)
			}
		}
		if notResponding == 0 && strings.HasSuffix(st[victim], "*") {
			notResponding = time.Since(killed)
		}
		return cluster.StateMatches(st[victim], "down*|down"), fmt.Sprintf("%v", st)
	})
	down := time.Since(killed)
	t.Logf("%s: not responding after %v, DOWN after %v (SlurmdTimeout %v)", victim, notResponding.Round(100*time.Millisecond), down.Round(100*time.Millisecond), c.SlurmdTimeout)
	if f := c.ShowNode(t, victim); !strings.HasPrefix(f["Reason"], "Not responding") || !strings.HasPrefix(f["State"], "DOWN") {
		t.Errorf("%s: State=%q Reason=%q, want DOWN+NOT_RESPONDING, Not responding", victim, f["State"], f["Reason"])
	}

	c.StartNode(t, victim)
	c.WaitNodes(t, "idle", []string{victim}, nodeBackIdleTimeout)
	t.Logf("%s: idle again %v after restart", victim, time.Since(c.NodeStarted(victim)).Round(100*time.Millisecond))
	holdIdle(t, c, c.NodeNames(), settle(c))
}

// testDynamicNode: `slurmd -Z --conf "Feature=dyn" -N d1` creates node d1 in
// slurmctld (select/cons_tres, MaxNodeCount, listens on SlurmdPort); it joins the
// Nodes=ALL partition and becomes idle. `scontrol show slurmd` without SLURMD_NODENAME
// asks localhost:SlurmdPort, i.e. d1.
func testDynamicNode(t *testing.T, c *cluster.Cluster) {
	const name = "d1"
	c.StartDynamicNode(t, name, "Feature=dyn")
	c.WaitNodes(t, "idle", []string{name}, dynamicNodeTimeout)
	f := c.ShowNode(t, name)
	check := func(key, want string) {
		t.Helper()
		if f[key] != want {
			t.Errorf("%s: %s=%q, want %q", name, key, f[key], want)
		}
	}
	check("NodeName", name)
	check("State", "IDLE+DYNAMIC_NORM")
	check("AvailableFeatures", "dyn")
	check("ActiveFeatures", "dyn")
	check("CPUTot", strconv.Itoa(c.HW.CPUs))
	check("RealMemory", strconv.FormatUint(c.HW.RealMemory, 10))
	check("NodeAddr", "127.0.0.1") // the registration's TCP peer
	check("Version", c.StockVersion)
	check("Partitions", "debug")

	st := cluster.ParseSinfoStates(c.MustRun(t, "", "sinfo", "-h", "-N", "-o", "%N %T"))
	if st[name] != "idle" {
		t.Errorf("sinfo: %s is %q, want idle", name, st[name])
	}
	s := c.ShowSlurmd(t, "", "") // no SLURMD_NODENAME: localhost:SlurmdPort
	if s["Slurmd PID"] != strconv.Itoa(c.NodePID(name)) || s["Hostname"] != name {
		t.Errorf("scontrol show slurmd (localhost:%d): PID %q Hostname %q, want %d %s", c.SlurmdPort, s["Slurmd PID"], s["Hostname"], c.NodePID(name), name)
	}
	holdIdle(t, c, append(c.NodeNames(), name), settle(c))
}

// settle is how long nodes must stay idle after an event: a node that does not
// answer slurmctld's next RPC is shown "idle*" at the latest one agent timeout
// (MessageTimeout) after the ping round that follows.
func settle(c *cluster.Cluster) time.Duration { return c.MessageTimeout + 2*c.PingInterval }

// holdIdle fails unless every named node stays plain idle for d.
func holdIdle(t *testing.T, c *cluster.Cluster, names []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, err := c.NodeStates(t, names...)
		if err != nil {
			t.Fatalf("sinfo: %v", err)
		}
		for _, n := range names {
			if st[n] != "idle" {
				t.Fatalf("node %s is %q, want idle (all: %v)", n, st[n], st)
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(statePollInterval)
	}
}

// unameOS returns what slurmd reports as OS ("sysname release version", like
// `uname -s -r -v`) and as Arch (machine).
func unameOS(t *testing.T) (osName, arch string) {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatalf("uname: %v", err)
	}
	str := func(a [65]int8) string {
		b := make([]byte, 0, len(a))
		for _, c := range a {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		return string(b)
	}
	return str(u.Sysname) + " " + str(u.Release) + " " + str(u.Version), str(u.Machine)
}

// hostBootTime is now - /proc/uptime.
func hostBootTime(t *testing.T) time.Time {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatalf("%v", err)
	}
	up, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatalf("/proc/uptime: %v", err)
	}
	return time.Now().Add(-time.Duration(up * float64(time.Second)))
}

// tmpDiskMB is slurmd's TmpDisk: statvfs("/tmp") f_blocks*f_frsize in MiB.
func tmpDiskMB(t *testing.T) uint64 {
	var s syscall.Statfs_t
	if err := syscall.Statfs("/tmp", &s); err != nil {
		t.Fatalf("statfs /tmp: %v", err)
	}
	return s.Blocks * uint64(s.Frsize) / (1 << 20)
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// testSetDebug: `scontrol setdebug LEVEL nodes=` and `setdebugflags +F nodes=`
// (24.11 and later; 22.05's scontrol has no nodes=) change the node daemon's
// level, as `scontrol show slurmd` reports it, and its DebugFlags, with
// stock's log line; an ordinary user is refused. The level goes back to
// debug2 for the tests after it.
// debugLineRe matches a debug or trace line of the node log: stock's
// "[time] debug2: ..." and slurmd-go's "time [DEBUG] ...".
var debugLineRe = regexp.MustCompile(`\] debug|\[(DEBUG|TRACE)\]`)

func testSetDebug(t *testing.T, c *cluster.Cluster) {
	n := c.NodeNames()[0]
	if c.ProtocolVersion < slurmproto.Version2411 {
		_, errOut, err := c.Run(t, "", "scontrol", "setdebug", "debug3", "nodes="+n)
		if err == nil || !strings.Contains(errOut, "too many arguments") {
			t.Errorf("22.05 scontrol setdebug with nodes=: %v %q, want \"too many arguments\"", err, errOut)
		}
		return
	}
	c.MustRun(t, "", "scontrol", "setdebug", "debug3", "nodes="+n)
	if got := c.ShowSlurmd(t, "", n)["Slurmd Debug"]; got != "7" {
		t.Errorf("%s: Slurmd Debug %q after setdebug debug3, want 7", n, got)
	}
	c.MustRun(t, "", "scontrol", "setdebug", "debug2", "nodes="+n)
	if got := c.ShowSlurmd(t, "", n)["Slurmd Debug"]; got != "6" {
		t.Errorf("%s: Slurmd Debug %q after setdebug debug2, want 6", n, got)
	}
	c.MustRun(t, "", "scontrol", "setdebugflags", "+Steps", "nodes="+n)
	c.WaitFor(t, n+" logs its new DebugFlags", shortJobTimeout, func() (bool, string) {
		b, _ := os.ReadFile(c.NodeLog(n))
		return strings.Contains(string(b), "Set DebugFlags to Steps"), "no \"Set DebugFlags to Steps\" in " + c.NodeLog(n)
	})
	for _, args := range [][]string{{"setdebug", "debug3"}, {"setdebugflags", "+Gres"}} {
		out, errOut, err := c.Run(t, cluster.TestUser, append([]string{"scontrol"}, append(args, "nodes="+n)...)...)
		if err == nil || !strings.Contains(errOut, "on one or more nodes") {
			t.Errorf("scontrol %v as %s: %v %q %q, want a refusal", args, cluster.TestUser, err, out, errOut)
		}
	}
	if got := c.ShowSlurmd(t, "", n)["Slurmd Debug"]; got != "6" {
		t.Errorf("%s: Slurmd Debug %q after an ordinary user's setdebug, want 6", n, got)
	}
	// The level reaches the step managers started after it (slurmd hands its
	// debug_level to slurmstepd): at info, neither the daemon nor a new job's
	// step manager writes a debug line (at SlurmdDebug=debug2 both do).
	c.MustRun(t, "", "scontrol", "setdebug", "info", "nodes="+n)
	from := len(readFileQuiet(c.NodeLog(n)))
	id := c.Sbatch(t, "root", "#!/bin/sh\necho ran\n", "-w", n, "-N1", "-o", "/dev/null")
	c.WaitJob(t, id, shortJobTimeout, "COMPLETED")
	var debug []string
	for _, l := range strings.Split(readFileQuiet(c.NodeLog(n))[from:], "\n") {
		if debugLineRe.MatchString(l) {
			debug = append(debug, l)
		}
	}
	if len(debug) > 0 {
		t.Errorf("%s: after setdebug info, job %s's run logged %d debug lines, first %q", n, id, len(debug), debug[0])
	}
	c.MustRun(t, "", "scontrol", "setdebug", "debug2", "nodes="+n)
}
