package k8stopo

import (
	"errors"
	"strings"
	"testing"
)

func TestTreeConf(t *testing.T) {
	conf, err := TreeConf([]Member{
		{Node: "n2", Placement: Placement{Tiers: []string{"f1", "sp1", "lg2"}}},
		{Node: "n1", Placement: Placement{Tiers: []string{"f1", "sp1", "lg1"}}},
		{Node: "n3", Placement: Placement{Tiers: []string{"f1", "sp1", "lg1"}}},
		{Node: "n4", Placement: Placement{Tiers: []string{"f1", "sp2", "lg1"}}}, // lg1 again, under sp2
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `SwitchName=f1.sp1.lg1 Nodes=n1,n3
SwitchName=f1.sp2.lg1 Nodes=n4
SwitchName=lg2 Nodes=n2
SwitchName=sp1 Switches=f1.sp1.lg1,lg2
SwitchName=sp2 Switches=f1.sp2.lg1
SwitchName=f1 Switches=sp1,sp2
`
	if body := conf[strings.IndexByte(conf, '\n')+1:]; body != want {
		t.Fatalf("got\n%s\nwant\n%s", body, want)
	}
	if !strings.HasPrefix(conf, "# ") {
		t.Fatalf("no header comment: %q", conf)
	}
}

func TestTreeConf_Invalid(t *testing.T) {
	for name, m := range map[string][]Member{
		"empty":      nil,
		"no tiers":   {{Node: "n1"}},
		"depths":     {{Node: "n1", Placement: Placement{Tiers: []string{"a", "b"}}}, {Node: "n2", Placement: Placement{Tiers: []string{"a"}}}},
		"twice":      {{Node: "n1", Placement: Placement{Tiers: []string{"a"}}}, {Node: "n1", Placement: Placement{Tiers: []string{"b"}}}},
		"bad name":   {{Node: "n 1", Placement: Placement{Tiers: []string{"a"}}}},
		"empty name": {{Placement: Placement{Tiers: []string{"a"}}}},
	} {
		if _, err := TreeConf(m); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

func TestBlockConf(t *testing.T) {
	conf, err := BlockConf([]Member{
		{Node: "n1", Placement: Placement{Block: "nvl-b"}},
		{Node: "n2", Placement: Placement{Block: "nvl-a"}},
		{Node: "n3", Placement: Placement{Block: "nvl-a"}},
	}, []int{2, 4})
	if err != nil {
		t.Fatal(err)
	}
	want := "BlockName=nvl-a Nodes=n2,n3\nBlockName=nvl-b Nodes=n1\nBlockSizes=2,4\n"
	if body := conf[strings.IndexByte(conf, '\n')+1:]; body != want {
		t.Fatalf("got\n%s\nwant\n%s", body, want)
	}
	if _, err := BlockConf([]Member{{Node: "n1", Placement: Placement{Block: "b"}}, {Node: "n2"}}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a node without block: %v", err)
	}
}

func TestDetectAll(t *testing.T) {
	kube := map[string]string{"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z"}
	cw := map[string]string{"ib.coreweave.cloud/fabric": "f", "ib.coreweave.cloud/superpod": "s", "ib.coreweave.cloud/leafgroup": "l",
		"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z"}
	if v, ok := DetectAll([]map[string]string{cw, cw}); !ok || v.Name != "coreweave" {
		t.Fatalf("two CoreWeave nodes: %q %v", v.Name, ok)
	}
	// One node lacks CoreWeave's keys: only the vocabulary both have counts.
	if v, ok := DetectAll([]map[string]string{cw, kube}); !ok || v.Name != "kubernetes" {
		t.Fatalf("CoreWeave and plain nodes: %q %v", v.Name, ok)
	}
	if _, ok := DetectAll([]map[string]string{cw, {}}); ok {
		t.Fatal("a node without labels: detected a vocabulary")
	}
	if _, ok := DetectAll(nil); ok {
		t.Fatal("no nodes: detected a vocabulary")
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]string{"nebius"}, "", []string{"f"})
	if err != nil || c.Name != "nebius" || c.Block != "topology.nebius.com/tier-0" || c.Features[0] != "f" {
		t.Fatalf("%+v %v", c, err)
	}
	c, err = ParseConfig([]string{"a", "b"}, "c", nil)
	if err != nil || strings.Join(c.Tiers, ",") != "a,b" || c.Block != "c" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseConfig(nil, "c", nil); err == nil {
		t.Fatal("a block without tiers accepted")
	}
}

func TestTopologyYAML(t *testing.T) {
	out, err := TopologyYAML([]Member{
		{Node: "n2", Placement: Placement{Tiers: []string{"r1", "zb"}, Block: "nvl-b"}},
		{Node: "n1", Placement: Placement{Tiers: []string{"r1", "za"}, Block: "nvl-a"}},
		{Node: "n3", Placement: Placement{Tiers: []string{"r1", "za"}, Block: "nvl-a"}},
	}, "default", []int{2})
	if err != nil {
		t.Fatal(err)
	}
	want := `- topology: default
  cluster_default: true
  tree:
    switches:
        - switch: r1
          children: za,zb
        - switch: za
          nodes: n1,n3
        - switch: zb
          nodes: n2
- topology: default-block
  cluster_default: false
  block:
    block_sizes:
        - 2
    blocks:
        - block: nvl-a
          nodes: n1,n3
        - block: nvl-b
          nodes: n2
`
	if body := out[strings.IndexByte(out, '\n')+1:]; body != want {
		t.Fatalf("got\n%s\nwant\n%s", body, want)
	}
	// Without a block on every node: the tree only.
	out, err = TopologyYAML([]Member{{Node: "n1", Placement: Placement{Tiers: []string{"r1"}}}}, "t", nil)
	if err != nil || strings.Contains(out, "block") || !strings.Contains(out, "nodes: n1") {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := TopologyYAML(nil, "t", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty: %v", err)
	}
}
