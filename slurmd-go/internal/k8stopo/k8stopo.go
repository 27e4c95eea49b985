package k8stopo

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
)

// Vocabulary is one provider's label keys (k8s-anchors.md §5).
type Vocabulary struct {
	Name  string
	Tiers []string // coarse to fine
	Block string   // "" if the provider has none
}

// Vocabularies are the defaults, tried in order by Detect.
var Vocabularies = []Vocabulary{
	{Name: "coreweave", Tiers: []string{"ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup"}, Block: "ds.coreweave.com/nvlink.domain"},
	{Name: "nebius", Tiers: []string{"topology.nebius.com/tier-2", "topology.nebius.com/tier-1"}, Block: "topology.nebius.com/tier-0"},
	{Name: "aws", Tiers: []string{"topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", "topology.k8s.aws/network-node-layer-3"}, Block: "topology.k8s.aws/ultraserver-id"},
	{Name: "gcp", Tiers: []string{"cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"}, Block: "cloud.google.com/gce-topology-host"},
	{Name: "oci", Tiers: []string{"oci.oraclecloud.com/host.network_block_id"}, Block: "oci.oraclecloud.com/host.rack_id"},
	{Name: "topograph", Tiers: []string{"fabric.topograph.run/tier-2", "fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0"}, Block: "accelerator.topograph.run/domain"},
	{Name: "kubernetes", Tiers: []string{"topology.kubernetes.io/region", "topology.kubernetes.io/zone"}},
}

// VocabularyNamed returns the default vocabulary called name.
func VocabularyNamed(name string) (Vocabulary, bool) {
	for _, v := range Vocabularies {
		if v.Name == name {
			return v, true
		}
	}
	return Vocabulary{}, false
}

// Detect picks the default vocabulary whose keys labels carry the most of
// (every tier needed); false if none is complete.
func Detect(labels map[string]string) (Vocabulary, bool) {
	best, bestN := Vocabulary{}, 0
	for _, v := range Vocabularies {
		n := 0
		for _, k := range v.Tiers {
			if labels[k] == "" {
				n = -1
				break
			}
			n++
		}
		if n > 0 && v.Block != "" && labels[v.Block] != "" {
			n++
		}
		if n > bestN {
			best, bestN = v, n
		}
	}
	return best, bestN > 0
}

// Placement is a node's place in the network, as Slurm names.
type Placement struct {
	Tiers    []string // switch names, coarse to fine
	Block    string   // "" without a block key
	Features []string // sorted
}

// Spec is the node's dynamic topology, "<topo>:<tier>:...:<tier>" as
// slurmd --conf "Topology=" and scontrol update take it (25.05+).
func (p Placement) Spec(topo string) string {
	return strings.Join(append([]string{topo}, p.Tiers...), ":")
}

// Config says which labels count.
type Config struct {
	Vocabulary
	Features []string // label keys whose values become features
}

// ErrNoTopology is Map's error for a label set it cannot place.
var ErrNoTopology = errors.New("k8stopo: no topology")

// Map places a node by labels. A missing or empty tier or block label is
// an error (wrapping ErrNoTopology) naming it; feature labels that are
// absent are left out.
func Map(labels map[string]string, cfg Config) (Placement, error) {
	if len(cfg.Tiers) == 0 {
		return Placement{}, fmt.Errorf("%w: no tier label keys configured", ErrNoTopology)
	}
	var p Placement
	var missing []string
	for _, k := range cfg.Tiers {
		v := labels[k]
		if v == "" {
			missing = append(missing, k)
			continue
		}
		p.Tiers = append(p.Tiers, Name(v))
	}
	if cfg.Block != "" {
		if v := labels[cfg.Block]; v != "" {
			p.Block = Name(v)
		} else {
			missing = append(missing, cfg.Block)
		}
	}
	if len(missing) > 0 {
		return Placement{}, fmt.Errorf("%w: node labels lack %s", ErrNoTopology, strings.Join(missing, ", "))
	}
	p.Features = Features(labels, cfg.Features)
	return p, nil
}

// Features are the values of the labels keys names, as Slurm names,
// sorted; absent labels are left out. Never nil.
func Features(labels map[string]string, keys []string) []string {
	out := []string{}
	for _, k := range keys {
		if v := labels[k]; v != "" {
			out = append(out, Name(v))
		}
	}
	sort.Strings(out)
	return out
}

// MaxName is the longest name kept as is; longer values are hashed, as
// topograph does for Kubernetes label values.
const MaxName = 63

// Name makes a label value a valid Slurm switch, block or feature name:
// letters, digits, '-', '_' and '.' are kept, anything else (the ',', ':',
// '[', ']', '=' and spaces slurm.conf parses) becomes '_'; a value longer
// than MaxName becomes "h" and its FNV-64a hash.
func Name(v string) string {
	if len(v) > MaxName {
		h := fnv.New64a()
		h.Write([]byte(v))
		return fmt.Sprintf("h%016x", h.Sum64())
	}
	b := []byte(v)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}
