package slurmproto

import (
	"bytes"
	"reflect"
	"testing"
)

func fwdSampleBodies() []Body {
	return []Body{
		&ForwardData{Address: "/var/spool/slurmd/sock.pmi2.7.0", Len: 3, Data: []byte{1, 2, 3}},
		&ForwardData{Address: "%n/sock", Len: 0},
		&JobStepKill{StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}, Signal: 9},
	}
}

// TestForwardData_Layout: packstr(address), pack32(len), packmem(data), as
// _pack_forward_data_msg of 22.05, 24.11 and 26.05.
func TestForwardData_Layout(t *testing.T) {
	want := []byte{
		0, 0, 0, 3, 'a', '/', 0, // packstr counts the NUL
		0, 0, 0, 2, // len
		0, 0, 0, 2, 0xde, 0xad, // packmem
	}
	for _, v := range Spoken() {
		enc, err := EncodeBody(v, &ForwardData{Address: "a/", Len: 2, Data: []byte{0xde, 0xad}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, want) {
			t.Fatalf("%s: got %x want %x", ReleaseName(v), enc, want)
		}
	}
}

// TestForwardData_LenMismatch: the u32 len and the data's own length are
// independent on the wire; the codec keeps both for the handler to check.
func TestForwardData_LenMismatch(t *testing.T) {
	b := []byte{0, 0, 0, 2, 'a', 0, 0, 0, 0, 9, 0, 0, 0, 1, 7}
	dec, err := DecodeBody(Version2205, RequestForwardData, b)
	if err != nil {
		t.Fatal(err)
	}
	m := dec.(*ForwardData)
	if m.Address != "a" || m.Len != 9 || !bytes.Equal(m.Data, []byte{7}) {
		t.Fatalf("got %+v", m)
	}
	if _, err := DecodeBody(Version2205, RequestForwardData, b[:12]); err == nil {
		t.Fatal("truncated data decoded")
	}
}

// TestGoldenForwardData: frames of srun -N4 -n8 --mpi=pmi2 (MPICH) on stock
// 22.05.8, 24.11.5 and 26.05.5 (munge and auth/slurm) nodes: a stepd's KVS_FENCE to its tree parent t1, srun's
// KVS_FENCE_RESP to t1 with forward list t[2-3], and t1's relay of it.
func TestGoldenForwardData(t *testing.T) {
	const addr = "/tmp/pmi2-c/spool/%n/sock.pmi2.1.0"
	tests := []struct {
		file string
		fwd  string
		want *ForwardData
	}{
		// TREE_CMD_KVS_FENCE (0) from node 1 "t2", 1 node represented, seq 1.
		{"forward_data_fence_v2600.bin", "", &ForwardData{Address: addr, Len: 21,
			Data: []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 't', '2', 0, 0, 0, 0, 1, 0, 0, 0, 1}}},
		// TREE_CMD_KVS_FENCE_RESP (1), seq 1, no pairs.
		{"forward_data_fence_resp_fwd_v2600.bin", "t[2-3]", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 1}}},
		{"forward_data_relayed_v2600.bin", "", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 1}}},
		// 24.11.5 in its chroot, the same step: t3's stepd to t1, srun to
		// t3 with forward list t4, t3's relay to t4.
		{"r2411/munge/forward_data_fence_v2a00.bin", "", &ForwardData{Address: addr, Len: 21,
			Data: []byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 't', '3', 0, 0, 0, 0, 1, 0, 0, 0, 1}}},
		{"r2411/munge/forward_data_fence_resp_fwd_v2a00.bin", "t4", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 1}}},
		{"r2411/munge/forward_data_relayed_v2a00.bin", "", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 1}}},
		// 26.05.5 in its chroot (MPICH 5.0.2 of sid fences twice, the first with its business cards: these are the
		// second fence, seq 2): t3's stepd to t1, srun to t1 with forward
		// list t2, t1's relay to t2.
		{"r2605/munge/forward_data_fence_v2d00.bin", "", &ForwardData{Address: addr, Len: 21,
			Data: []byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 't', '3', 0, 0, 0, 0, 1, 0, 0, 0, 2}}},
		{"r2605/munge/forward_data_fence_resp_fwd_v2d00.bin", "t2", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 2}}},
		{"r2605/munge/forward_data_relayed_v2d00.bin", "", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 2}}},
		// The same under auth/slurm.
		{"r2605/slurm/forward_data_fence_v2d00.bin", "", &ForwardData{Address: addr, Len: 21,
			Data: []byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 't', '3', 0, 0, 0, 0, 1, 0, 0, 0, 2}}},
		{"r2605/slurm/forward_data_fence_resp_fwd_v2d00.bin", "t2", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 2}}},
		{"r2605/slurm/forward_data_relayed_v2d00.bin", "", &ForwardData{Address: addr, Len: 6, Data: []byte{0, 1, 0, 0, 0, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, b := decodeGolden(t, tc.file)
			if m.Header.Forward.Nodes != tc.fwd {
				t.Errorf("forward %q, want %q", m.Header.Forward.Nodes, tc.fwd)
			}
			if !reflect.DeepEqual(b, Body(tc.want)) {
				t.Errorf("got %+v\nwant %+v", b, tc.want)
			}
			if enc, err := EncodeBody(m.Header.Version, tc.want); err != nil || !bytes.Equal(enc, m.Body) {
				t.Errorf("EncodeBody(want): %v", err)
			}
		})
	}
}

// TestJobStepKill_Layout: pack_step_id, packstr sjob_id, packstr sibling,
// pack16 signal, pack16 flags (22.05 _pack_job_step_kill_msg).
func TestJobStepKill_Layout(t *testing.T) {
	enc, err := EncodeBody(Version2205, &JobStepKill{StepID: StepID{JobID: 7, StepID: 1, StepHetComp: NoVal}, Signal: 9})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 7, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0}
	if !bytes.Equal(enc, want) {
		t.Fatalf("got %x want %x", enc, want)
	}
}
