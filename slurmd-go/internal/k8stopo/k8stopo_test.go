package k8stopo

import (
	"errors"
	"strings"
	"testing"
)

func TestMap_Vocabularies(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		vocab  string
		tiers  string
		block  string
	}{
		{map[string]string{"topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1a"}, "kubernetes", "us-east-1:us-east-1a", ""},
		{map[string]string{"ib.coreweave.cloud/fabric": "f1", "ib.coreweave.cloud/superpod": "sp2", "ib.coreweave.cloud/leafgroup": "lg3", "ds.coreweave.com/nvlink.domain": "nvl72-7",
			"topology.kubernetes.io/zone": "z"}, "coreweave", "f1:sp2:lg3", "nvl72-7"},
		{map[string]string{"topology.nebius.com/tier-2": "spine a", "topology.nebius.com/tier-1": "leaf:1", "topology.nebius.com/tier-0": "nvl[3]"}, "nebius", "spine_a:leaf_1", "nvl_3_"},
		{map[string]string{"topology.k8s.aws/network-node-layer-1": "nn-1", "topology.k8s.aws/network-node-layer-2": "nn-2", "topology.k8s.aws/network-node-layer-3": "nn-3"}, "aws", "nn-1:nn-2:nn-3", ""},
	} {
		v, ok := Detect(tc.labels)
		if !ok || v.Name != tc.vocab {
			t.Fatalf("%v: detected %q %v, want %s", tc.labels, v.Name, ok, tc.vocab)
		}
		cfg := Config{Vocabulary: v}
		if tc.block == "" {
			cfg.Block = "" // the provider's block label is not set here
		}
		p, err := Map(tc.labels, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(p.Tiers, ":"); got != tc.tiers || p.Block != tc.block {
			t.Fatalf("%s: tiers %q block %q, want %q %q", tc.vocab, got, p.Block, tc.tiers, tc.block)
		}
	}
}

func TestMap_NeverEmpty(t *testing.T) {
	kube, _ := VocabularyNamed("kubernetes")
	for _, labels := range []map[string]string{
		nil,
		{"topology.kubernetes.io/region": "r"},
		{"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": ""},
	} {
		if p, err := Map(labels, Config{Vocabulary: kube}); !errors.Is(err, ErrNoTopology) || !strings.Contains(err.Error(), "topology.kubernetes.io/zone") {
			t.Fatalf("%v: %+v %v, want an error naming the zone label", labels, p, err)
		}
	}
	if _, err := Map(map[string]string{"a": "b"}, Config{}); !errors.Is(err, ErrNoTopology) {
		t.Fatalf("no keys: %v", err)
	}
	if _, ok := Detect(map[string]string{"kubernetes.io/hostname": "n1"}); ok {
		t.Fatal("a vocabulary detected from no topology label")
	}
}

func TestMap_AnyOrderedKeysAndFeatures(t *testing.T) {
	labels := map[string]string{"example.com/hall": "H1", "example.com/row": "r7", "example.com/rack": "rk-12", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "zone": "z1"}
	p, err := Map(labels, Config{Vocabulary: Vocabulary{Tiers: []string{"example.com/hall", "example.com/row"}, Block: "example.com/rack"},
		Features: []string{"zone", "nvidia.com/gpu.product", "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec("default") != "default:H1:r7" || p.Block != "rk-12" || strings.Join(p.Features, ",") != "NVIDIA-H100-80GB-HBM3,z1" {
		t.Fatalf("%+v spec %s", p, p.Spec("default"))
	}
}

func TestName(t *testing.T) {
	long := strings.Repeat("x", 64)
	for in, want := range map[string]string{"zone-a": "zone-a", "a b,c=d:e": "a_b_c_d_e", "x.y_z": "x.y_z", long: Name(long)} {
		if got := Name(in); got != want {
			t.Fatalf("Name(%q) = %q, want %q", in, got, want)
		}
	}
	if h := Name(long); len(h) != 17 || h[0] != 'h' || h == Name(long+"y") {
		t.Fatalf("hashed name %q", h)
	}
}
