package topoapi

import (
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
)

// Source answers for nodes. Implementations must be safe for concurrent
// use; a node it does not know comes back with only its Name set.
type Source interface {
	Nodes(names []string) []NodeInfo
}

// ConfSource is the daemon's Source: addresses and ports from the running
// slurm.conf (config.Config.NodeAddr, the forwarder's resolver), zones and
// blocks from the topology.conf beside it. topology.conf is read again
// when its modification time or size changes, so that a file rewritten by
// the topology controller is seen without a reconfigure.
type ConfSource struct {
	Config func() *config.Config
	Log    hclog.Logger

	mu    sync.Mutex // guards the cache below
	path  string
	mtime time.Time
	size  int64
	topo  *Topology
}

// Nodes implements Source.
func (s *ConfSource) Nodes(names []string) []NodeInfo {
	cfg := s.Config()
	topo := s.topology(TopologyConfPath(cfg.Conf.File))
	out := make([]NodeInfo, 0, len(names))
	for _, name := range names {
		n := NodeInfo{Name: name}
		if hp, ok := cfg.NodeAddr(name); ok {
			if h, p, err := net.SplitHostPort(hp); err == nil {
				port, _ := strconv.ParseUint(p, 10, 16)
				n.Addr, n.Port = h, uint16(port)
			}
			n.Zone, n.Block = topo.Zone[name], topo.Block[name]
		}
		out = append(out, n)
	}
	return out
}

// topology is the cached topology.conf at path, reread when it changed. A
// file that does not parse keeps the last good one (logged), as a bad
// edit should not take every job's zones away.
func (s *ConfSource) topology(path string) *Topology {
	s.mu.Lock()
	defer s.mu.Unlock()
	var mtime time.Time
	var size int64 = -1
	if fi, err := os.Stat(path); err == nil {
		mtime, size = fi.ModTime(), fi.Size()
	}
	if s.topo != nil && path == s.path && mtime.Equal(s.mtime) && size == s.size {
		return s.topo
	}
	t, err := LoadTopology(path)
	if err != nil {
		s.log().Warn("cannot read topology.conf; zones stay as last read", "path", path, "error", err)
		if s.topo == nil {
			s.topo = &Topology{Zone: map[string]string{}, Block: map[string]string{}}
		}
		// Not read again (nor logged again) until the file changes.
		s.path, s.mtime, s.size = path, mtime, size
		return s.topo
	}
	s.path, s.mtime, s.size, s.topo = path, mtime, size, t
	return t
}

func (s *ConfSource) log() hclog.Logger {
	if s.Log == nil {
		return hclog.NewNullLogger()
	}
	return s.Log
}
