package topoapi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// TopologyConfName is topology.conf, read beside slurm.conf as slurmctld's
// topology/tree and topology/block plugins do (get_extra_conf_path).
const TopologyConfName = "topology.conf"

// TopologyConfPath is the topology.conf for the slurm.conf at slurmConf.
func TopologyConfPath(slurmConf string) string {
	return filepath.Join(filepath.Dir(slurmConf), TopologyConfName)
}

// Topology is what topology.conf says about nodes: the leaf switch
// (SwitchName with Nodes=) and the block (BlockName) of each.
type Topology struct {
	Zone  map[string]string
	Block map[string]string
}

// LoadTopology reads the topology.conf at path. A missing file is an empty
// topology: zones are then unknown, which the API reports as None.
func LoadTopology(path string) (*Topology, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return &Topology{Zone: map[string]string{}, Block: map[string]string{}}, nil
	}
	lines, err := slurmconf.ReadLines(path, "")
	if err != nil {
		return nil, fmt.Errorf("topoapi: %s: %w", path, err)
	}
	return ParseTopology(lines)
}

// ParseTopology reads topology.conf lines. Keys are matched without case,
// as s_p_parse_file does; keys other than SwitchName, BlockName, Nodes and
// Switches (LinkSpeed, BlockSizes, ...) are ignored. A node under two leaf
// switches or in two blocks is an error, as it is for slurmctld.
func ParseTopology(lines []slurmconf.Line) (*Topology, error) {
	t := &Topology{Zone: map[string]string{}, Block: map[string]string{}}
	for _, l := range lines {
		kv := map[string]string{}
		first := ""
		for rest := l.Text; !slurmconf.IsBlank(rest); {
			k, v, r, ok := slurmconf.NextKeyValue(rest)
			if !ok {
				return nil, fmt.Errorf("topoapi: %s:%d: cannot parse %q", l.File, l.Line, strings.TrimSpace(rest))
			}
			k = strings.ToLower(k)
			if first == "" {
				first = k
			}
			kv[k] = v
			rest = r
		}
		var into map[string]string
		switch first {
		case "switchname":
			into = t.Zone
		case "blockname":
			into = t.Block
		default:
			continue // BlockSizes=..., a future key
		}
		name := kv[first]
		nodes, ok := kv["nodes"]
		if !ok || name == "" {
			continue // an upper switch (Switches=) holds no node directly
		}
		hosts, err := hostlist.Expand(nodes)
		if err != nil {
			return nil, fmt.Errorf("topoapi: %s:%d: Nodes=%s: %w", l.File, l.Line, nodes, err)
		}
		for _, h := range hosts {
			if old, dup := into[h]; dup && old != name {
				return nil, fmt.Errorf("topoapi: %s:%d: node %s is in both %s and %s", l.File, l.Line, h, old, name)
			}
			into[h] = name
		}
	}
	return t, nil
}
