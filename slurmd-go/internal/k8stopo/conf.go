package k8stopo

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Member is one Slurm node and its placement.
type Member struct {
	Node string
	Placement
}

// ErrInvalid is the error of a topology that must not reach slurmctld.
var ErrInvalid = errors.New("k8stopo: invalid topology")

// check refuses what slurmctld would take badly: no nodes, a node twice, a
// node name slurm.conf cannot hold, nodes with different tree depths (the
// same label keys give every node the same number of tiers).
func check(members []Member, needTiers, needBlock bool) error {
	if len(members) == 0 {
		return fmt.Errorf("%w: no nodes", ErrInvalid)
	}
	seen := map[string]bool{}
	depth := len(members[0].Tiers)
	for _, m := range members {
		switch {
		case m.Node == "" || Name(m.Node) != m.Node:
			return fmt.Errorf("%w: node name %q", ErrInvalid, m.Node)
		case seen[m.Node]:
			return fmt.Errorf("%w: node %s placed twice", ErrInvalid, m.Node)
		case needTiers && (len(m.Tiers) == 0 || len(m.Tiers) != depth):
			return fmt.Errorf("%w: node %s has %d tiers, node %s %d", ErrInvalid, m.Node, len(m.Tiers), members[0].Node, depth)
		case needBlock && m.Block == "":
			return fmt.Errorf("%w: node %s has no block", ErrInvalid, m.Node)
		}
		seen[m.Node] = true
	}
	return nil
}

// switchNames names every switch of the tree: a switch is its tier's value,
// unless that value names another switch too (the same leaf value under two
// parents, or at two levels), then it is its whole path joined by '.'.
// Keys are paths ("a\x00b").
func switchNames(members []Member) map[string]string {
	paths := map[string]map[string]bool{} // value -> paths using it
	for _, m := range members {
		for i := range m.Tiers {
			p := strings.Join(m.Tiers[:i+1], "\x00")
			if paths[m.Tiers[i]] == nil {
				paths[m.Tiers[i]] = map[string]bool{}
			}
			paths[m.Tiers[i]][p] = true
		}
	}
	names := map[string]string{}
	for v, ps := range paths {
		for p := range ps {
			if len(ps) == 1 {
				names[p] = v
			} else {
				names[p] = strings.ReplaceAll(p, "\x00", ".")
			}
		}
	}
	return names
}

// TreeConf is topology.conf for topology/tree: one SwitchName line per
// switch, leaves first with their nodes, then each upper level with its
// child switches. Lines are sorted so that the same labels give the same
// bytes. An invalid or empty topology is an error wrapping ErrInvalid.
func TreeConf(members []Member) (string, error) {
	if err := check(members, true, false); err != nil {
		return "", err
	}
	names := switchNames(members)
	depth := len(members[0].Tiers)
	// per level: switch name -> children (nodes at the leaves)
	levels := make([]map[string]map[string]bool, depth)
	for i := range levels {
		levels[i] = map[string]map[string]bool{}
	}
	for _, m := range members {
		for i := depth - 1; i >= 0; i-- {
			sw := names[strings.Join(m.Tiers[:i+1], "\x00")]
			child := m.Node
			if i < depth-1 {
				child = names[strings.Join(m.Tiers[:i+2], "\x00")]
			}
			if levels[i][sw] == nil {
				levels[i][sw] = map[string]bool{}
			}
			levels[i][sw][child] = true
		}
	}
	var b strings.Builder
	b.WriteString("# Written by slurmd-go's topology controller from Kubernetes Node labels; edits are overwritten.\n")
	for i := depth - 1; i >= 0; i-- {
		key := "Switches"
		if i == depth-1 {
			key = "Nodes"
		}
		for _, sw := range sortedKeys(levels[i]) {
			fmt.Fprintf(&b, "SwitchName=%s %s=%s\n", sw, key, strings.Join(sortedKeys(levels[i][sw]), ","))
		}
	}
	return b.String(), nil
}

// BlockConf is topology.conf for topology/block (23.11+): one BlockName
// line per block, and BlockSizes when sizes are given.
func BlockConf(members []Member, sizes []int) (string, error) {
	if err := check(members, false, true); err != nil {
		return "", err
	}
	blocks := map[string]map[string]bool{}
	for _, m := range members {
		if blocks[m.Block] == nil {
			blocks[m.Block] = map[string]bool{}
		}
		blocks[m.Block][m.Node] = true
	}
	var b strings.Builder
	b.WriteString("# Written by slurmd-go's topology controller from Kubernetes Node labels; edits are overwritten.\n")
	for _, bl := range sortedKeys(blocks) {
		fmt.Fprintf(&b, "BlockName=%s Nodes=%s\n", bl, strings.Join(sortedKeys(blocks[bl]), ","))
	}
	if len(sizes) > 0 {
		s := make([]string, len(sizes))
		for i, n := range sizes {
			s[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(&b, "BlockSizes=%s\n", strings.Join(s, ","))
	}
	return b.String(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DetectAll picks the default vocabulary every label set has complete
// (all its tiers), the one with the most keys present when several do;
// false if none is complete on all of them.
func DetectAll(sets []map[string]string) (Vocabulary, bool) {
	if len(sets) == 0 {
		return Vocabulary{}, false
	}
	best, bestN := Vocabulary{}, 0
	for _, v := range Vocabularies {
		n := 0
		for _, labels := range sets {
			for _, k := range v.Tiers {
				if labels[k] == "" {
					n = -1
					break
				}
				n++
			}
			if n < 0 {
				break
			}
			if v.Block != "" && labels[v.Block] != "" {
				n++
			}
		}
		if n > bestN {
			best, bestN = v, n
		}
	}
	return best, bestN > 0
}

// ParseConfig reads the label flags shared by the daemon and the
// controller: keys is a vocabulary's name or label keys coarse to fine
// (none: the caller detects), block the block's key (overriding the
// vocabulary's), features the keys that become features.
func ParseConfig(keys []string, block string, features []string) (Config, error) {
	cfg := Config{Features: features}
	switch len(keys) {
	case 0:
	case 1:
		if v, ok := VocabularyNamed(keys[0]); ok {
			cfg.Vocabulary = v
			break
		}
		fallthrough
	default:
		cfg.Tiers = keys
	}
	if block != "" {
		cfg.Block = block
	}
	if len(cfg.Tiers) == 0 && cfg.Block != "" {
		return cfg, fmt.Errorf("k8stopo: a block label needs topology labels")
	}
	return cfg, nil
}
