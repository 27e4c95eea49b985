package k8stopo

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// topology.yaml (25.05+) as topology.yaml(5) reads it: a list of named
// topologies, "topology" first in each.
type yamlTopology struct {
	Topology       string     `yaml:"topology"`
	ClusterDefault bool       `yaml:"cluster_default"`
	Tree           *yamlTree  `yaml:"tree,omitempty"`
	Block          *yamlBlock `yaml:"block,omitempty"`
}

type yamlTree struct {
	Switches []yamlSwitch `yaml:"switches"`
}

type yamlSwitch struct {
	Switch   string `yaml:"switch"`
	Children string `yaml:"children,omitempty"`
	Nodes    string `yaml:"nodes,omitempty"`
}

type yamlBlock struct {
	BlockSizes []int           `yaml:"block_sizes,omitempty"`
	Blocks     []yamlBlockUnit `yaml:"blocks"`
}

type yamlBlockUnit struct {
	Block string `yaml:"block"`
	Nodes string `yaml:"nodes"`
}

// TopologyYAML is topology.yaml for the members: topology name, the
// cluster default, a tree of their tiers; and, when every member has a
// block, a second topology name+"-block" of those blocks (for partitions
// that name it). Invalid input is an error wrapping ErrInvalid.
func TopologyYAML(members []Member, name string, blockSizes []int) (string, error) {
	if err := check(members, true, false); err != nil {
		return "", err
	}
	names := switchNames(members)
	depth := len(members[0].Tiers)
	children := map[string]map[string]bool{}
	level := map[string]int{}
	allBlocks := true
	blocks := map[string]map[string]bool{}
	for _, m := range members {
		for i := 0; i < depth; i++ {
			sw := names[strings.Join(m.Tiers[:i+1], "\x00")]
			level[sw] = i
			child := m.Node
			if i < depth-1 {
				child = names[strings.Join(m.Tiers[:i+2], "\x00")]
			}
			if children[sw] == nil {
				children[sw] = map[string]bool{}
			}
			children[sw][child] = true
		}
		if m.Block == "" {
			allBlocks = false
		} else {
			if blocks[m.Block] == nil {
				blocks[m.Block] = map[string]bool{}
			}
			blocks[m.Block][m.Node] = true
		}
	}
	sws := sortedKeys(children)
	// coarse to fine, then by name: each switch after its parent
	sort.SliceStable(sws, func(i, j int) bool { return level[sws[i]] < level[sws[j]] })
	tree := &yamlTree{}
	for _, sw := range sws {
		s := yamlSwitch{Switch: sw}
		list := strings.Join(sortedKeys(children[sw]), ",")
		if level[sw] == depth-1 {
			s.Nodes = list
		} else {
			s.Children = list
		}
		tree.Switches = append(tree.Switches, s)
	}
	tops := []yamlTopology{{Topology: name, ClusterDefault: true, Tree: tree}}
	if allBlocks {
		b := &yamlBlock{BlockSizes: blockSizes}
		for _, bl := range sortedKeys(blocks) {
			b.Blocks = append(b.Blocks, yamlBlockUnit{Block: bl, Nodes: strings.Join(sortedKeys(blocks[bl]), ",")})
		}
		tops = append(tops, yamlTopology{Topology: name + "-block", Block: b})
	}
	out, err := yaml.Marshal(tops)
	if err != nil {
		return "", fmt.Errorf("k8stopo: topology.yaml: %w", err)
	}
	return "# Written by slurmd-go's topology controller from Kubernetes Node labels; edits are overwritten.\n" + string(out), nil
}
