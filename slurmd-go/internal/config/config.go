package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// Config is the daemon's resolved configuration: slurm.conf with the
// command line applied and this node picked out. Immutable once built;
// reconfigure builds a new one.
type Config struct {
	Flags Flags
	Conf  *slurmconf.Config
	// Cgroup is the cgroup.conf beside slurm.conf, read as the same
	// release (defaults when there is none); nil for a Config built by
	// Resolve alone.
	Cgroup   *slurmconf.CgroupConf
	NodeName string
	// Node is this node's NodeName line; for a dynamic node (-Z) it is
	// built from --conf and the hardware.
	Node     *slurmconf.Node
	Hostname string // short host name

	Port       uint16
	ListenAddr string // host:port we bind
	SpoolDir   string
	PidFile    string
	LogFile    string
	// TmpFS is slurm.conf's TmpFS with %h and %n expanded for this node,
	// as slurmd measures TmpDisk on it.
	TmpFS     string
	CtldHosts []string // host:port, primary first

	// MultipleSlurmd is set when other NodeNames in slurm.conf share our
	// address: several node daemons on one host share one munged, so a
	// forwarded credential is legitimately seen twice (Debian's Slurm is
	// built with MULTIPLE_SLURMD for the same reason).
	MultipleSlurmd bool
}

// ErrNoNodeName is returned when neither -N nor the host name names a node.
var ErrNoNodeName = errors.New("config: cannot determine this node's NodeName")

// Load reads slurm.conf and the cgroup.conf beside it as Slurm 22.05's
// slurmd does, and resolves them for this node.
func Load(f Flags) (*Config, error) { return LoadAs(f, slurmconf.V2205) }

// LoadAs is Load as the slurmd of release version reads the files
// (slurmconf.V2205, V2411, V2605), or leniently (slurmconf.Lenient: what
// any of them accepts), which is how the daemon reads them before it knows
// its controller's release.
func LoadAs(f Flags, version uint16) (*Config, error) {
	conf, err := slurmconf.Load(f.ConfFile, slurmconf.Options{Version: version})
	if err != nil {
		return nil, err
	}
	cg, err := slurmconf.LoadCgroup(slurmconf.CgroupConfPath(conf.File), slurmconf.Options{Version: conf.Version})
	if err != nil {
		return nil, err
	}
	c, err := Resolve(f, conf)
	if err != nil {
		return nil, err
	}
	c.Cgroup = cg
	return c, nil
}

// CtldHosts are slurm.conf's SlurmctldHost entries as host:port, primary
// first.
func CtldHosts(conf *slurmconf.Config) ([]string, error) {
	var hosts []string
	for _, h := range conf.SlurmctldHost {
		a := h.Addr
		if a == "" {
			a = h.Name
		}
		hosts = append(hosts, net.JoinHostPort(a, strconv.Itoa(int(conf.SlurmctldPort))))
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("config: %s names no SlurmctldHost", conf.File)
	}
	return hosts, nil
}

// Resolve applies the command line to a parsed slurm.conf.
func Resolve(f Flags, conf *slurmconf.Config) (*Config, error) {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	c := &Config{Flags: f, Conf: conf, Hostname: host, NodeName: f.NodeName}
	if c.NodeName == "" {
		if n, ok := conf.NodeByHost(host); ok {
			c.NodeName = n.Name
		} else if _, ok := conf.Node(host); ok {
			c.NodeName = host
		} else if f.Dynamic {
			c.NodeName = host
		} else {
			return nil, fmt.Errorf("%w: host %q is no NodeName or NodeHostname in %s (use -N)", ErrNoNodeName, host, conf.File)
		}
	}
	if n, ok := conf.Node(c.NodeName); ok {
		c.Node = n
	} else if f.Dynamic {
		n, err := slurmconf.ParseNodeLine("NodeName=" + c.NodeName + " " + f.DynamicConf)
		if err != nil {
			return nil, fmt.Errorf("config: --conf %q: %w", f.DynamicConf, err)
		}
		c.Node = n
	} else {
		return nil, fmt.Errorf("%w: NodeName %q is not in %s", ErrNoNodeName, c.NodeName, conf.File)
	}
	c.Port = c.Node.Port
	if c.Port == 0 {
		c.Port = conf.SlurmdPort
	}
	bind := ""
	if conf.CommunicationParameters.NoInAddrAny() && c.Node.Addr != "" {
		bind = c.Node.Addr
	}
	c.ListenAddr = net.JoinHostPort(bind, strconv.Itoa(int(c.Port)))
	c.SpoolDir = slurmconf.ExpandPath(conf.SlurmdSpoolDir, c.NodeName, host)
	c.PidFile = slurmconf.ExpandPath(conf.SlurmdPidFile, c.NodeName, host)
	c.LogFile = slurmconf.ExpandPath(conf.SlurmdLogFile, c.NodeName, host)
	c.TmpFS = slurmconf.ExpandPath(conf.TmpFS, c.NodeName, host)
	if f.LogFile != "" {
		c.LogFile = f.LogFile
	}
	var err error
	if c.CtldHosts, err = CtldHosts(conf); err != nil {
		return nil, err
	}
	_, static := conf.Node(c.NodeName)
	for _, n := range conf.Nodes() {
		if n.Name == c.NodeName {
			continue
		}
		// A dynamic node has no address in slurm.conf: it shares the
		// host with every node whose address is one of this machine's.
		if addrOf(n) == addrOf(c.Node) || (!static && isLocalAddr(addrOf(n))) {
			c.MultipleSlurmd = true
			break
		}
	}
	// Daemons with addresses of their own can still share one munged (pods
	// on one Kubernetes node with the host's socket, nodes in network
	// namespaces): nothing in slurm.conf says so.
	if os.Getenv(SharedMungedEnv) == "1" {
		c.MultipleSlurmd = true
	}
	return c, nil
}

// SharedMungedEnv, set to 1, says other node daemons share this one's munged:
// a credential seen twice is then forwarding, not a replay attack.
const SharedMungedEnv = "TIEE_SHARED_MUNGED"

// isLocalAddr reports whether a NodeAddr names this machine: localhost, a
// loopback address or one of its interface addresses. Names other than
// localhost are not resolved (no DNS wait at start).
func isLocalAddr(a string) bool {
	if a == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, x := range addrs {
		if p, err := netip.ParsePrefix(x.String()); err == nil && p.Addr() == ip.Unmap() {
			return true
		}
	}
	return false
}

func addrOf(n *slurmconf.Node) string {
	if n.Addr != "" {
		return n.Addr
	}
	return n.Name
}

// NodeAddr returns a node's host:port for forwarding, from slurm.conf.
func (c *Config) NodeAddr(name string) (string, bool) {
	n, ok := c.Conf.Node(name)
	if !ok {
		return "", false
	}
	port := n.Port
	if port == 0 {
		port = c.Conf.SlurmdPort
	}
	return net.JoinHostPort(addrOf(n), strconv.Itoa(int(port))), true
}

// HashPolicy returns the body-hash rules of CommunicationParameters.
func (c *Config) HashPolicy() auth.HashPolicy {
	cp := c.Conf.CommunicationParameters
	return auth.HashPolicy{BlockNullHash: cp.BlockNullHash(), BlockZeroHash: cp.BlockZeroHash()}
}

// MessageTimeout is MessageTimeout, at least one second.
func (c *Config) MessageTimeout() time.Duration {
	if c.Conf.MessageTimeout < time.Second {
		return 10 * time.Second
	}
	return c.Conf.MessageTimeout
}

// ConstrainRAMSpace reports cgroup.conf's ConstrainRAMSpace=yes: with
// TaskPlugin=task/cgroup, slurmd then caps a job's memory at what its
// credential allows. No cgroup.conf means the default (no).
func (c *Config) ConstrainRAMSpace() bool {
	return c.Cgroup != nil && c.Cgroup.ConstrainRAMSpace
}
