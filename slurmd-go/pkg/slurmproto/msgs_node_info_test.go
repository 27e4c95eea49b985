package slurmproto

import (
	"os"
	"testing"
)

// TestNodeInfo_Goldens: the head of each release's node record up to the
// reason decodes from the real slurmctld's replies (testdata/README.md,
// node_info_*): name, DRAIN bit, reason, Gres.
func TestNodeInfo_Goldens(t *testing.T) {
	const reason = "gpu: GPU 3 (00000000:1B:00.0): XID 79"
	for _, g := range []struct {
		file    string
		v       uint16
		none    bool
		drained bool
		reason  string
	}{
		{"testdata/node_info_drained_v2600.bin", Version2205, false, true, reason},
		{"testdata/node_info_none_v2600.bin", Version2205, true, false, ""},
		{"testdata/node_info_afterresume_v2600.bin", Version2205, false, false, ""},
		{"testdata/r2411/munge/node_info_drained_v2a00.bin", Version2411, false, true, reason},
		{"testdata/r2411/munge/node_info_none_v2a00.bin", Version2411, true, false, ""},
		{"testdata/r2411/munge/node_info_afterresume_v2a00.bin", Version2411, false, false, reason},
		{"testdata/r2605/munge/node_info_drained_v2d00.bin", Version2605, false, true, reason},
		{"testdata/r2605/munge/node_info_none_v2d00.bin", Version2605, true, false, ""},
		{"testdata/r2605/munge/node_info_afterresume_v2d00.bin", Version2605, false, false, ""},
	} {
		t.Run(g.file, func(t *testing.T) {
			m, b := goldenBody(t, g.file)
			if m.Header.Version != g.v {
				t.Fatalf("version %x", m.Header.Version)
			}
			ni := b.(*NodeInfo)
			if g.none {
				if ni.Node != nil || ni.Records != 0 {
					t.Fatalf("want no record, got %+v", ni)
				}
				return
			}
			r := ni.Node
			if r == nil || r.Name != "t1" || r.Gres != "gpu:2" {
				t.Fatalf("record %+v", r)
			}
			if drained := r.NodeState&NodeStateDrain != 0; drained != g.drained || r.Reason != g.reason {
				t.Fatalf("state 0x%x reason %q, want drained %v reason %q", r.NodeState, r.Reason, g.drained, g.reason)
			}
		})
	}
}

// TestNodeInfo_Refused: a reply of several records, and a 22.05 record of
// another select plugin, are errors, not guesses.
func TestNodeInfo_Refused(t *testing.T) {
	frame, err := os.ReadFile("testdata/node_info_drained_v2600.bin")
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMessage(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	two := append([]byte(nil), m.Body...)
	two[3] = 2
	if _, err := DecodeBody(Version2205, ResponseNodeInfo, two); err == nil {
		t.Fatal("two records decoded")
	}
	var p Packer
	p.U32(1)
	p.TimeUnix(0)
	if _, err := DecodeBody(Version2205, ResponseNodeInfo, append(p.Bytes(), make([]byte, 400)...)); err == nil {
		t.Fatal("a zeroed record (select plugin 0) decoded")
	}
}
