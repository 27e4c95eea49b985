package slurmproto

import (
	"bytes"
	"os"
	"testing"
)

// TestUpdateNode_Goldens: the body slurmd-go builds to drain and to resume
// its node is byte for byte the body of each release's real scontrol
// (testdata/README.md, update_node_*).
func TestUpdateNode_Goldens(t *testing.T) {
	const reason = "gpu: GPU 3 (00000000:1B:00.0): XID 79"
	for _, g := range []struct {
		file  string
		v     uint16
		state uint32
		rsn   string
	}{
		{"testdata/update_node_drain_v2600.bin", Version2205, NodeStateDrain, reason},
		{"testdata/update_node_resume_v2600.bin", Version2205, NodeResume, ""},
		{"testdata/r2411/munge/update_node_drain_v2a00.bin", Version2411, NodeStateDrain, reason},
		{"testdata/r2411/munge/update_node_resume_v2a00.bin", Version2411, NodeResume, ""},
		{"testdata/r2605/munge/update_node_drain_v2d00.bin", Version2605, NodeStateDrain, reason},
		{"testdata/r2605/munge/update_node_resume_v2d00.bin", Version2605, NodeResume, ""},
	} {
		t.Run(g.file, func(t *testing.T) {
			m, b := goldenBody(t, g.file)
			if m.Header.Version != g.v || m.Header.MsgType != RequestUpdateNode {
				t.Fatalf("header %x %v", m.Header.Version, m.Header.MsgType)
			}
			got := b.(*UpdateNode)
			if got.NodeNames != "t1" || got.NodeState != g.state || got.Reason != g.rsn {
				t.Fatalf("decoded %+v", got)
			}
			want := NewUpdateNode("t1")
			want.NodeState, want.Reason = g.state, g.rsn
			enc, err := EncodeBody(g.v, &want)
			if err != nil {
				t.Fatal(err)
			}
			if orig := m.Body; !bytes.Equal(enc, orig) {
				t.Fatalf("NewUpdateNode body differs from scontrol's:\n got %x\nwant %x", enc, orig)
			}
		})
	}
}

// goldenBody reads one golden frame and decodes its body.
func goldenBody(t *testing.T, file string) (*Message, Body) {
	t.Helper()
	frame, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMessage(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		t.Fatal(err)
	}
	return m, b
}
