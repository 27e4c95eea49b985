package slurmproto

import (
	"bytes"
	"testing"
)

// gresGoldens are the registrations stock slurmd of each release sent with
// pkg/gres/testdata/stock/typed_shard_t1 (testdata/cluster/capture_gres.sh).
var gresGoldens = []struct {
	file string
	v    uint16
}{
	{"reg_status_gres_v2600.bin", Version2205},
	{"r2411/munge/reg_status_gres_v2a00.bin", Version2411},
	{"r2605/munge/reg_status_gres_v2d00.bin", Version2605},
}

// TestGolden_GresNodeConfig: the gres_info of each release's registration
// unpacks into the 12 records `slurmd -G` listed for that gres.conf, at the
// release's version, and packs back to the same bytes.
func TestGolden_GresNodeConfig(t *testing.T) {
	const (
		gpu   = 7696487    // gres_build_id("gpu")
		mps   = 7565421    // "mps"
		shard = 1918986455 // "shard"
	)
	type want struct {
		name, typ, cpus, links string
		count                  uint64
		plugin                 uint32
	}
	// The order slurmd -G printed (pkg/gres/testdata/stock/typed_shard_t1).
	wants := []want{
		{"shard", "tesla", "0", "", 2, shard}, {"shard", "tesla", "0", "", 2, shard},
		{"shard", "k80", "", "", 2, shard}, {"shard", "k80", "", "", 2, shard},
		{"mps", "tesla", "0", "", 0, mps}, {"gpu", "tesla", "0", "", 1, gpu},
		{"mps", "tesla", "0", "", 0, mps}, {"gpu", "tesla", "0", "", 1, gpu},
		{"mps", "k80", "", "", 0, mps}, {"gpu", "k80", "", "-1,0", 1, gpu},
		{"mps", "k80", "", "", 0, mps}, {"gpu", "k80", "", "-1,0", 1, gpu},
	}
	for _, g := range gresGoldens {
		t.Run(g.file, func(t *testing.T) {
			m, body := decodeGolden(t, g.file)
			reg, ok := body.(*NodeRegistrationStatus)
			if !ok || m.Header.Version != g.v {
				t.Fatalf("%T at %#x, want registration at %#x", body, m.Header.Version, g.v)
			}
			v, recs, err := UnpackGresNodeConfig(reg.GresInfo)
			if err != nil {
				t.Fatal(err)
			}
			if v != g.v || len(recs) != len(wants) {
				t.Fatalf("version %#x, %d records; want %#x, %d", v, len(recs), g.v, len(wants))
			}
			for i, w := range wants {
				r := recs[i]
				if r.Name != w.name || r.Type != w.typ || r.CPUs != w.cpus || r.Links != w.links ||
					r.Count != w.count || r.PluginID != w.plugin || r.CPUCnt != 2 || r.UniqueID != "" {
					t.Errorf("record %d: %+v, want %+v", i, r, w)
				}
			}
			if got := PackGresNodeConfig(v, recs); !bytes.Equal(got, reg.GresInfo) {
				t.Errorf("re-packed gres_info differs:\n got  %x\n want %x", got, reg.GresInfo)
			}
		})
	}
}
