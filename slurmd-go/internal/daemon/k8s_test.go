package daemon

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestTopoConfig_VocabularyOrKeys(t *testing.T) {
	c, err := topoConfig(config.Flags{K8sTopologyLabels: []string{"coreweave"}})
	if err != nil || c.Block != "ds.coreweave.com/nvlink.domain" || len(c.Tiers) != 3 {
		t.Fatalf("%+v %v", c, err)
	}
	c, err = topoConfig(config.Flags{K8sTopologyLabels: []string{"a/hall", "a/row"}, K8sBlockLabel: "a/rack"})
	if err != nil || c.Block != "a/rack" || len(c.Tiers) != 2 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := topoConfig(config.Flags{K8sBlockLabel: "a/rack"}); err == nil {
		t.Fatal("a block without tiers accepted")
	}
}

func TestK8sFeatures_MergedWithTheNodesOwn(t *testing.T) {
	d := &Daemon{log: hclog.NewNullLogger()}
	cfg := &config.Config{Flags: config.Flags{Dynamic: true, DynamicConf: "Features=gpu,ib CPUs=2"}}
	if _, ok := d.k8sFeatures(cfg); ok {
		t.Fatal("features before any label set")
	}
	tc, _ := topoConfig(config.Flags{K8sFeatureLabels: []string{"topology.kubernetes.io/zone", "nvidia.com/gpu.product"}, K8sTopologyLabels: []string{"kubernetes"}})
	if !d.applyLabels(map[string]string{"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "r1", "nvidia.com/gpu.product": "H100 SXM"}, tc) {
		t.Fatal("first label set: no change reported")
	}
	if f, _ := d.k8sFeatures(cfg); f != "gpu,ib,H100_SXM,zone-a" {
		t.Fatalf("features %q", f)
	}
	if d.applyLabels(map[string]string{"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "r1", "nvidia.com/gpu.product": "H100 SXM", "other": "x"}, tc) {
		t.Fatal("same features reported as a change")
	}
	// zone relabelled, region dropped: features follow, the placement stays the last good one
	if !d.applyLabels(map[string]string{"topology.kubernetes.io/zone": "zone-b", "nvidia.com/gpu.product": "H100 SXM"}, tc) {
		t.Fatal("zone change not reported")
	}
	if f, _ := d.k8sFeatures(cfg); f != "gpu,ib,H100_SXM,zone-b" {
		t.Fatalf("features %q", f)
	}
	if p := d.k8s.placement; p == nil || p.Spec("default") != "default:r1:zone-a" {
		t.Fatalf("placement %+v, want the last complete one", p)
	}
}

// A dynamic node's Topology= from its labels: only for releases that take
// one (25.05+), named by --k8s-topology-name, the block alone without tiers.
func TestK8sTopologySpec(t *testing.T) {
	d := &Daemon{log: hclog.NewNullLogger()}
	d.cfg.Store(&config.Config{Flags: config.Flags{Dynamic: true, K8sTopologyName: "fabric"}})
	if s := d.k8sTopologySpec(slurmproto.Version2605); s != "" {
		t.Fatalf("before any label set: %q", s)
	}
	tc, _ := topoConfig(config.Flags{K8sTopologyLabels: []string{"kubernetes"}})
	d.applyLabels(map[string]string{"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "r1"}, tc)
	if s := d.k8sTopologySpec(slurmproto.Version2605); s != "fabric:r1:zone-a" {
		t.Fatalf("26.05: %q", s)
	}
	for _, v := range []uint16{slurmproto.Version2205, slurmproto.Version2411} {
		if s := d.k8sTopologySpec(v); s != "" {
			t.Fatalf("%s has no dynamic topology, got %q", slurmproto.ReleaseName(v), s)
		}
	}
	d.k8s.placement.Tiers, d.k8s.placement.Block = nil, "nvl-7"
	if s := d.k8sTopologySpec(slurmproto.Version2605); s != "fabric:nvl-7" {
		t.Fatalf("block only: %q", s)
	}
}
