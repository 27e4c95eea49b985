package cluster

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Network zones (Options.Zones).
//
// A zoned cluster draws a second octet k (from a hash of its name, the first one
// free from there on; see pickZoneOctet) and builds, in the root network
// namespace:
//
//	zone z (0, 1, ... in order of first appearance in Options.Zones):
//	    bridge tz<kkk>b<z>, address 10.k.z.254/24 (the zone's gateway)
//	node i (1-based position in Nodes), of zone z:
//	    network namespace tz<kkk>-<NodeName> (/run/netns), lo up, eth0 10.k.z.i/24,
//	    default route via 10.k.z.254; eth0's peer tz<kkk>v<i> is a port of the bridge
//
// (kkk: k in three digits). net.ipv4.ip_forward is turned on (and left on) so the
// zones reach each other through the root namespace, where slurmctld and every
// client command stay: slurm.conf says SlurmctldHost=localhost(10.k.0.254) and
// NodeAddr=10.k.z.i per node, each node daemon is started through
// `nsenter --net=/run/netns/<ns> --` (which execs it: the harness's pid is the
// daemon's), and its step managers and tasks inherit the namespace. Traffic within
// a zone is bridged; traffic between zones is routed (the forward hook); traffic
// between a node and the root namespace is local there (input/output hooks).
//
// SetZoneLatency queues the routed packets between zones to a netfilter queue
// the test binary serves (delayQueue): iptables chain tz<kkk> in table filter,
// jumped to from FORWARD, rules -s 10.k.a.0/24 -d 10.k.b.0/24 -j NFQUEUE
// --queue-num 29696+k --queue-bypass. BlockZones is nftables table inet
// <ClusterName>_z<kkk>, a forward-hook chain that drops those packets.
//
// k is owned through flock on /run/tiee-zones/k<kkk>.lock, held until Stop: the
// holder of the lock deletes anything of that k's names it finds (a run that was
// killed before its Stop) before building, and Stop deletes everything again.

// Zone address plan.
const (
	zoneOctetLow   = 100 // k is drawn from [zoneOctetLow, zoneOctetLow+zoneOctetCount)
	zoneOctetCount = 100
	zoneGatewayIP  = 254 // last octet of each zone's gateway (bridge) address
	zoneMaxNodes   = 253 // last octets 1..253 are the nodes
	zoneLockDir    = "/run/tiee-zones"
	zoneQueueBase  = 0x7400 // netfilter queue number is this + k
	zoneCmdTimeout = 10 * time.Second
)

// zoneNet is a cluster's zones: the address plan and what was built for it.
type zoneNet struct {
	k      int
	prefix string   // "tz<kkk>": every name built starts with it
	lock   *os.File // flock on zoneLockDir/k<kkk>.lock
	zones  []string // distinct zone names; index is the third octet
	table  string   // nftables table name (family inet)

	nodeZone map[string]int    // node -> zone index
	addr     map[string]string // node -> address
	netns    map[string]string // node -> network namespace name

	mu      sync.Mutex  // guards queue, latency, blocked
	queue   *delayQueue // nil until SetZoneLatency with d > 0
	latency time.Duration
	blocked bool
}

func (z *zoneNet) nodeAddrs() map[string]string {
	if z == nil {
		return nil
	}
	return z.addr
}

func (z *zoneNet) ctldAddr() string {
	if z == nil {
		return ""
	}
	return z.gateway(0)
}

// netnsPath is the namespace file of a static node ("" without zones or for a
// node of none, such as a dynamic one).
func (z *zoneNet) netnsPath(node string) string {
	if z == nil || z.netns[node] == "" {
		return ""
	}
	return filepath.Join("/run/netns", z.netns[node])
}

func (z *zoneNet) gateway(zone int) string {
	return fmt.Sprintf("10.%d.%d.%d", z.k, zone, zoneGatewayIP)
}
func (z *zoneNet) subnet(zone int) string { return fmt.Sprintf("10.%d.%d.0/24", z.k, zone) }
func (z *zoneNet) bridge(zone int) string { return fmt.Sprintf("%sb%d", z.prefix, zone) }
func (z *zoneNet) chain() string          { return z.prefix }
func (z *zoneNet) queueNum() uint16       { return uint16(zoneQueueBase + z.k) }

// startZones builds the zones of Options.Zones; c.Name and c.Nodes are set.
// Whatever was built is removed by Stop, also when this fails halfway.
func (c *Cluster) startZones(t testing.TB) {
	t.Helper()
	zs := c.opts.Zones
	if len(zs) != len(c.Nodes) {
		t.Fatalf("cluster: Options.Zones has %d entries for %d nodes", len(zs), len(c.Nodes))
	}
	if len(c.Nodes) > zoneMaxNodes {
		t.Fatalf("cluster: Options.Zones supports at most %d nodes", zoneMaxNodes)
	}
	z := &zoneNet{nodeZone: map[string]int{}, addr: map[string]string{}, netns: map[string]string{}}
	index := map[string]int{}
	for i, name := range zs {
		if name == "" {
			t.Fatalf("cluster: Options.Zones[%d] (node %s) is empty", i, c.Nodes[i].Name)
		}
		if _, ok := index[name]; !ok {
			index[name] = len(z.zones)
			z.zones = append(z.zones, name)
		}
	}
	if len(z.zones) > zoneGatewayIP {
		t.Fatalf("cluster: Options.Zones names %d zones, at most %d", len(z.zones), zoneGatewayIP)
	}
	if err := z.pickZoneOctet(c.Name); err != nil {
		t.Fatalf("%v", err)
	}
	z.table = fmt.Sprintf("%s_z%03d", c.Name, z.k)
	c.zn = z // from here on Stop tears down
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(b)) != "1" {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
			t.Fatalf("cluster: zones: enable net.ipv4.ip_forward: %v", err)
		}
	}
	var cmds [][]string
	for zi := range z.zones {
		br := z.bridge(zi)
		cmds = append(cmds,
			[]string{"ip", "link", "add", br, "type", "bridge"},
			[]string{"ip", "addr", "add", z.gateway(zi) + "/24", "dev", br},
			[]string{"ip", "link", "set", br, "up"})
	}
	for i, n := range c.Nodes {
		zi := index[zs[i]]
		ns := z.prefix + "-" + n.Name
		veth := fmt.Sprintf("%sv%d", z.prefix, i+1)
		addr := fmt.Sprintf("10.%d.%d.%d", z.k, zi, i+1)
		z.nodeZone[n.Name], z.addr[n.Name], z.netns[n.Name] = zi, addr, ns
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			// The peer is born as eth0 inside the namespace (the root has its own eth0).
			[]string{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "link", "set", veth, "master", z.bridge(zi), "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", ns, "addr", "add", addr + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "route", "add", "default", "via", z.gateway(zi)})
	}
	for _, argv := range cmds {
		if out, err := zoneCmd(argv...); err != nil {
			t.Fatalf("cluster: zones: %q: %v: %s", argv, err, out)
		}
	}
	var plan []string
	for zi, name := range z.zones {
		var ns []string
		for _, n := range c.Nodes {
			if z.nodeZone[n.Name] == zi {
				ns = append(ns, n.Name+"="+z.addr[n.Name])
			}
		}
		plan = append(plan, fmt.Sprintf("%s: %s gw %s [%s]", name, z.bridge(zi), z.gateway(zi), strings.Join(ns, " ")))
	}
	t.Logf("cluster %s: zones (prefix %s, slurmctld at %s): %s", c.Name, z.prefix, z.ctldAddr(), strings.Join(plan, "; "))
}

// zoneCmd runs argv bounded by zoneCmdTimeout, returning its combined output.
func zoneCmd(argv ...string) (string, error) {
	return runBounded(exec.Command(argv[0], argv[1:]...), zoneCmdTimeout)
}

// pickZoneOctet takes the first k from name's hash on whose lock it gets and
// whose 10.k.0.0/16 no route of the machine overlaps once k's own leftovers are
// gone.
func (z *zoneNet) pickZoneOctet(name string) error {
	if err := os.MkdirAll(zoneLockDir, 0o755); err != nil {
		return fmt.Errorf("cluster: zones: %w", err)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	start := int(h.Sum32() % zoneOctetCount)
	var busy []string
	for j := 0; j < zoneOctetCount; j++ {
		k := zoneOctetLow + (start+j)%zoneOctetCount
		f, err := os.OpenFile(filepath.Join(zoneLockDir, fmt.Sprintf("k%03d.lock", k)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("cluster: zones: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // a live cluster has it
			}
			return fmt.Errorf("cluster: zones: flock %s: %w", f.Name(), err)
		}
		z.k, z.prefix, z.lock = k, fmt.Sprintf("tz%03d", k), f
		if err := z.removeAll(); err != nil {
			z.unlock()
			return err
		}
		conflict, err := routeOverlaps(fmt.Sprintf("10.%d.0.0/16", k))
		if err != nil {
			z.unlock()
			return err
		}
		if conflict == "" {
			return nil
		}
		busy = append(busy, fmt.Sprintf("10.%d/16 (%s)", k, conflict))
		z.unlock()
	}
	return fmt.Errorf("cluster: zones: no free 10.k.0.0/16 for k in [%d,%d): locked by live clusters or routed: %v",
		zoneOctetLow, zoneOctetLow+zoneOctetCount, busy)
}

func (z *zoneNet) unlock() {
	if z.lock != nil {
		z.lock.Close() // releases the flock
		z.lock = nil
	}
}

// routeOverlaps returns a route (any table, local addresses included) whose
// destination overlaps cidr, or "".
func routeOverlaps(cidr string) (string, error) {
	_, want, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	out, err := zoneCmd("ip", "-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return "", fmt.Errorf("cluster: zones: ip route show: %v: %s", err, out)
	}
	types := map[string]bool{"unicast": true, "local": true, "broadcast": true, "multicast": true, "anycast": true,
		"unreachable": true, "blackhole": true, "prohibit": true, "throw": true, "nat": true}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && types[f[0]] {
			f = f[1:]
		}
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		dst := f[0]
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		_, n, err := net.ParseCIDR(dst)
		if err != nil {
			continue
		}
		if n.Contains(want.IP) || want.Contains(n.IP) {
			return strings.TrimSpace(line), nil
		}
	}
	return "", nil
}

// removeAll deletes everything named for k: the latency chain, nftables tables
// of any cluster ending in _z<kkk>, links tz<kkk>b* / tz<kkk>v* and namespaces
// tz<kkk>-*. Only while holding k's lock.
func (z *zoneNet) removeAll() error {
	var errs []string
	note := func(argv []string, out string, err error) {
		if err != nil {
			errs = append(errs, fmt.Sprintf("%q: %v: %s", argv, err, strings.TrimSpace(out)))
		}
	}
	z.removeLatencyRules()
	out, err := zoneCmd("nft", "list", "tables", "inet")
	note([]string{"nft", "list", "tables", "inet"}, out, err)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" && strings.HasSuffix(f[2], fmt.Sprintf("_z%03d", z.k)) {
			argv := []string{"nft", "delete", "table", "inet", f[2]}
			out, err := zoneCmd(argv...)
			note(argv, out, err)
		}
	}
	links, err := z.links()
	if err != nil {
		errs = append(errs, err.Error())
	}
	// Veths first (each takes its peer along), then the bridges.
	for _, kind := range []byte{'v', 'b'} {
		for _, l := range links {
			if l[len(z.prefix)] == kind {
				argv := []string{"ip", "link", "del", l}
				out, err := zoneCmd(argv...)
				note(argv, out, err)
			}
		}
	}
	nss, err := z.namespaces()
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, ns := range nss {
		argv := []string{"ip", "netns", "del", ns}
		out, err := zoneCmd(argv...)
		note(argv, out, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: zones: removing %s*: %s", z.prefix, strings.Join(errs, "; "))
	}
	return nil
}

// links are the root namespace's links named tz<kkk>b<n> or tz<kkk>v<n>.
func (z *zoneNet) links() ([]string, error) {
	out, err := zoneCmd("ip", "-o", "link", "show")
	if err != nil {
		return nil, fmt.Errorf("ip link show: %v: %s", err, out)
	}
	var ls []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line) // "7: tz123v1@if2: <...>"
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		rest, ok := strings.CutPrefix(name, z.prefix)
		if !ok || len(rest) < 2 || (rest[0] != 'b' && rest[0] != 'v') {
			continue
		}
		if _, err := strconv.Atoi(rest[1:]); err == nil {
			ls = append(ls, name)
		}
	}
	return ls, nil
}

// namespaces are the named network namespaces tz<kkk>-*.
func (z *zoneNet) namespaces() ([]string, error) {
	out, err := zoneCmd("ip", "netns", "list")
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %v: %s", err, out)
	}
	var nss []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], z.prefix+"-") {
			nss = append(nss, f[0])
		}
	}
	return nss, nil
}

// teardown removes everything of the zones, checks that nothing is left and
// releases k. Stop calls it once every process of the cluster is gone.
func (z *zoneNet) teardown() error {
	z.mu.Lock()
	q := z.queue
	z.queue = nil
	z.mu.Unlock()
	var errs []string
	z.removeLatencyRules() // before the queue goes: no packet waits for a listener
	if q != nil {
		if err := q.close(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := z.removeAll(); err != nil {
		errs = append(errs, err.Error())
	}
	var left []string
	if ls, err := z.links(); err != nil || len(ls) > 0 {
		left = append(left, fmt.Sprintf("links %v %v", ls, err))
	}
	if nss, err := z.namespaces(); err != nil || len(nss) > 0 {
		left = append(left, fmt.Sprintf("namespaces %v %v", nss, err))
	}
	if out, err := zoneCmd("nft", "list", "table", "inet", z.table); err == nil {
		left = append(left, "nft table "+z.table+": "+out)
	}
	if out, err := zoneCmd("iptables", "-w", "10", "-S", z.chain()); err == nil {
		left = append(left, "iptables chain "+z.chain()+": "+out)
	}
	if len(left) > 0 {
		errs = append(errs, "left behind: "+strings.Join(left, "; "))
	}
	z.unlock()
	if len(errs) > 0 {
		return fmt.Errorf("cluster: zones %s: %s", z.prefix, strings.Join(errs, "; "))
	}
	return nil
}

// removeLatencyRules unhooks and deletes the latency chain, if any (errors mean
// it was not there).
func (z *zoneNet) removeLatencyRules() {
	for i := 0; i < 8; i++ { // one jump per SetZoneLatency that hooked it; normally one
		if _, err := zoneCmd("iptables", "-w", "10", "-D", "FORWARD", "-j", z.chain()); err != nil {
			break
		}
	}
	_, _ = zoneCmd("iptables", "-w", "10", "-F", z.chain())
	_, _ = zoneCmd("iptables", "-w", "10", "-X", z.chain())
}

// crossZonePairs are the (source, destination) subnets of every ordered pair of
// different zones.
func (z *zoneNet) crossZonePairs() [][2]string {
	var ps [][2]string
	for a := range z.zones {
		for b := range z.zones {
			if a != b {
				ps = append(ps, [2]string{z.subnet(a), z.subnet(b)})
			}
		}
	}
	return ps
}

func (c *Cluster) mustZones(t testing.TB, what string) *zoneNet {
	t.Helper()
	if c.zn == nil {
		t.Fatalf("cluster: %s on %s, started without Options.Zones", what, c.Name)
	}
	return c.zn
}

// NodeAddr is the address of a static node, its NodeAddr in slurm.conf: its own
// in its zone's subnet with Options.Zones (10.k.z.i), else 127.0.0.1; "" for a
// name that is no static node. Any goroutine.
func (c *Cluster) NodeAddr(name string) string {
	if !c.isStatic(name) {
		return ""
	}
	if c.zn != nil {
		return c.zn.addr[name]
	}
	return "127.0.0.1"
}

// CtldAddr is slurmctld's address in slurm.conf (SlurmctldHost): with
// Options.Zones the first zone's gateway in the root namespace (10.k.0.254),
// which every node's namespace reaches through its own gateway; else 127.0.0.1.
// Any goroutine.
func (c *Cluster) CtldAddr() string {
	return orLoopback(c.zn.ctldAddr())
}

// SetZoneLatency delays every packet routed from one zone's subnet to another's
// by d (d == 0: no delay), so a round trip between two zones takes at least 2*d;
// traffic within a zone (bridged) and between a node and the root namespace
// (slurmctld, srun) is not delayed. The delay is a netfilter queue served by the
// test binary (see delayQueue: this kernel has no tc netem), so it holds each
// packet at least d, a little more on a busy machine. Zones only. Test goroutine
// only.
func (c *Cluster) SetZoneLatency(t testing.TB, d time.Duration) {
	t.Helper()
	z := c.mustZones(t, "SetZoneLatency")
	if d < 0 {
		t.Fatalf("cluster: SetZoneLatency(%v): negative", d)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if d == 0 {
		z.removeLatencyRules()
		if z.queue != nil {
			z.queue.setDelay(0) // packets still held go after their delay
		}
		z.latency = 0
		return
	}
	if z.queue == nil {
		q, err := openDelayQueue(z.queueNum(), d)
		if err != nil {
			t.Fatalf("%v", err)
		}
		z.queue = q
	}
	z.queue.setDelay(d)
	// The chain anew, then hooked once (-C: already hooked).
	z.removeLatencyRules()
	cmds := [][]string{{"iptables", "-w", "10", "-N", z.chain()}}
	for _, p := range z.crossZonePairs() {
		cmds = append(cmds, []string{"iptables", "-w", "10", "-A", z.chain(), "-s", p[0], "-d", p[1],
			"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(z.queueNum())), "--queue-bypass"})
	}
	cmds = append(cmds, []string{"iptables", "-w", "10", "-I", "FORWARD", "1", "-j", z.chain()})
	for _, argv := range cmds {
		if out, err := zoneCmd(argv...); err != nil {
			t.Fatalf("cluster: SetZoneLatency: %q: %v: %s", argv, err, out)
		}
	}
	z.latency = d
}

// BlockZones(true) drops every packet routed between different zones' subnets,
// as a Kubernetes network policy isolating the zones would: nftables table inet
// <ClusterName>_z<kkk>, chain forward (hook forward, priority 0), one drop rule
// per ordered pair of zones. Traffic within a zone and between a node and the root
// namespace (slurmctld, srun, sbatch, scontrol) still passes. BlockZones(false)
// deletes the table. Zones only. Test goroutine only.
func (c *Cluster) BlockZones(t testing.TB, on bool) {
	t.Helper()
	z := c.mustZones(t, "BlockZones")
	z.mu.Lock()
	defer z.mu.Unlock()
	// "table" then "delete table": the script works whether or not it exists.
	script := fmt.Sprintf("table inet %[1]s\ndelete table inet %[1]s\n", z.table)
	if on {
		var b strings.Builder
		fmt.Fprintf(&b, "table inet %s {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n", z.table)
		for _, p := range z.crossZonePairs() {
			fmt.Fprintf(&b, "\t\tip saddr %s ip daddr %s counter drop\n", p[0], p[1])
		}
		b.WriteString("\t}\n}\n")
		script += b.String()
	}
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := runBounded(cmd, zoneCmdTimeout); err != nil {
		t.Fatalf("cluster: BlockZones(%v): nft -f: %v: %s\n%s", on, err, out, script)
	}
	z.blocked = on
}

// DialFrom connects over TCP from node's network namespace to addr ("ip:port",
// an address literal), bounded by timeout, closes the connection at once and
// returns how long the connect took: one SYN / SYN-ACK round trip. A node
// daemon's Port at NodeAddr and CtldPort at CtldAddr are listening. Zones only.
// Any goroutine.
func (c *Cluster) DialFrom(t testing.TB, node, addr string, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	z := c.mustZones(t, "DialFrom")
	ns := z.netnsPath(node)
	if ns == "" {
		t.Fatalf("cluster: DialFrom: %s is not a static node of %s", node, c.Name)
	}
	type result struct {
		d   time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The socket is made in the namespace of the thread that makes it: this
		// goroutine's, locked to its thread, which goes back to the others only in
		// the test binary's own namespace again (else it ends with the goroutine).
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("cluster: DialFrom: %w", err)}
			return
		}
		defer home.Close()
		target, err := os.Open(ns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("cluster: DialFrom: %w", err)}
			return
		}
		err = unix.Setns(int(target.Fd()), unix.CLONE_NEWNET)
		target.Close()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("cluster: DialFrom: setns %s: %w", ns, err)}
			return
		}
		start := time.Now()
		conn, err := net.DialTimeout("tcp", addr, timeout)
		d := time.Since(start)
		if conn != nil {
			conn.Close()
		}
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{d, err}
	}()
	r := <-ch
	return r.d, r.err
}
