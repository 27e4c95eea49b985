package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

func zonesRun() *results.Zones {
	z := &results.Zones{Schema: results.ZonesSchemaVersion, Profile: "full", Started: "2026-12-04T19:00:00Z", Release: "22.05",
		Config: results.ZonesConfig{Nodes: []string{"n1", "n2", "n3", "n4", "n5", "n6"}, Zones: []string{"za", "zb", "za", "zb", "za", "za"},
			Ranks: 4, Bytes: 16 << 20, Warmup: 2, Iters: 10, DelaysMS: []float64{0, 1}, DelayModel: "a queue", ConnectTimeoutS: 120, FailBoundS: 30}}
	for _, d := range []float64{0, 1} {
		z.Steps = append(z.Steps,
			results.ZoneStep{Placement: results.PlacementOneZone, DelayMS: d, Nodes: []string{"n1", "n3", "n5", "n6"}, Zones: []string{"za", "za", "za", "za"}, MedianS: 0.1, MinS: 0.09, MaxS: 0.12},
			results.ZoneStep{Placement: results.PlacementTwoZones, DelayMS: d, RTTms: 2*d + 0.1, Nodes: []string{"n1", "n2", "n3", "n4"}, Zones: []string{"za", "zb", "za", "zb"}, MedianS: 0.1 + 0.2*d, MinS: 0.1, MaxS: 0.5})
	}
	z.Block = []results.ZoneBlock{
		{Plugin: true, HeldS: 3, Message: "srun: error: tiee-topology: job 7: n1 (zone za) cannot reach n2 (zone zb)", Nodes: []string{"n1", "n2", "n3", "n4"}},
		{Plugin: false, HeldS: 120.5, Message: "allreduce: rank 0 (node n1): cannot reach rank 1", Nodes: []string{"n1", "n2", "n3", "n4"}},
	}
	return z
}

func TestZonesFragment(t *testing.T) {
	f := ZonesFragment(zonesRun(), "bench/results/zones/results.json", "../bench/results/zones/")
	for _, want := range []string{
		"**Measured on simulated zones**",
		"16 MiB float32 gradient between the 4 tasks",
		"n1 (za), n3 (za), n5 (za), n6 (za): zone za",
		"n1 (za), n2 (zb), n3 (za), n4 (zb) (rank order)",
		"| 0.00 ms | 0.10 ms | 100.0 ms | 100.0 ms | **1.00x** |",
		"| 1.00 ms | 2.10 ms | 100.0 ms | 300.0 ms | **3.00x** |",
		"![step time against cross-zone delay, one zone vs two zones](../bench/results/zones/zones_step_time.png)",
		"| with tiee_topology | **3.0 s** | 0 |",
		"| without the plugin | **120.5 s** | 0 |",
		"40.2x sooner (3.0 s against 120.5 s)",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("fragment lacks %q:\n%s", want, f)
		}
	}
}

func TestWriteZones_SplicesRFC(t *testing.T) {
	skipPlots = true
	t.Cleanup(func() { skipPlots = false })
	root := t.TempDir()
	rfc := filepath.Join(root, "rfc")
	dir := filepath.Join(root, "bench", "results", "zones")
	if err := os.MkdirAll(rfc, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "# RFC\n\n<!-- BEGIN GENERATED results-zones.md -->\nstale\n<!-- END GENERATED results-zones.md -->\nafter\n"
	if err := os.WriteFile(filepath.Join(rfc, RFCName), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteZones(zonesRun(), dir, rfc); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(rfc, RFCName))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got); strings.Contains(s, "stale") || !strings.Contains(s, "Generated from `bench/results/zones/results.json`") || !strings.HasSuffix(s, "<!-- END GENERATED results-zones.md -->\nafter\n") {
		t.Errorf("RFC after WriteZones:\n%s", s)
	}
	z, err := results.LoadZones(filepath.Join(dir, "results.json"))
	if err != nil || len(z.Steps) != 4 || len(z.Block) != 2 {
		t.Fatalf("results.json read back: %v, %+v", err, z)
	}
	if _, err := os.Stat(filepath.Join(rfc, ZonesBlock)); err != nil {
		t.Errorf("fragment: %v", err)
	}
}
