package slurmproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func bm(n int, set ...int) *Bitmap {
	b := NewBitmap(n)
	for _, i := range set {
		b.Set(i)
	}
	return b
}

func TestGresBuildID(t *testing.T) {
	// gres_build_id: 'g' + 'p'<<8 + 'u'<<16 = 0x757067; shard wraps at 4.
	if got := GresBuildID("gpu"); got != 0x757067 {
		t.Errorf("gpu: 0x%x", got)
	}
	want := uint32('s') + uint32('h')<<8 + uint32('a')<<16 + uint32('r')<<24 + uint32('d')
	if got := GresBuildID("shard"); got != want {
		t.Errorf("shard: 0x%x, want 0x%x", got, want)
	}
	if GresBuildID("") != 0 {
		t.Error("empty name")
	}
}

// TestGresJobState_2205Layout holds one record to the byte layout of
// 22.05's gres_job_state_pack, written out field by field.
func TestGresJobState_2205Layout(t *testing.T) {
	rec := GresJobState{PluginID: GresBuildID("gpu"), Flags: 0x8, GresPerNode: 2, TotalGres: 2,
		NodeCnt: 1, CntNodeAlloc: []uint64{2}, BitAlloc: []*Bitmap{bm(4, 0, 1)}, TypeName: ""}
	got := EncodeGresJobStates([]GresJobState{rec}, Version2205)
	want := strings.Join([]string{
		"0001",                 // rec_cnt
		"438a34d4", "00757067", // magic, plugin_id
		"0000", "0008", // cpus_per_gres, flags
		"0000000000000000",                   // gres_per_job
		"0000000000000002",                   // gres_per_node
		"0000000000000000",                   // gres_per_socket
		"0000000000000000",                   // gres_per_task
		"0000000000000000",                   // mem_per_gres
		"0000",                               // ntasks_per_gres
		"0000000000000002",                   // total_gres
		"00000000",                           // type_name NULL
		"00000001",                           // node_cnt
		"01", "00000001", "0000000000000002", // gres_cnt_node_alloc
		"01", "00000004", "00000004", "30783300", // gres_bit_alloc[0]: 4 bits "0x3"
		"00", "00", // no step bitmaps, no step counts
	}, "")
	if hex.EncodeToString(got) != want {
		t.Errorf("got  %x\nwant %s", got, want)
	}
	dec, err := DecodeGresJobStates(got, Version2205)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, []GresJobState{rec}) {
		t.Errorf("decoded %+v", dec)
	}
}

// sampleGres are records with every optional part, per release.
func sampleGres(v uint16) ([]GresJobState, []GresStepState) {
	job := []GresJobState{{
		PluginID: GresBuildID("gpu"), CPUsPerGres: 1, Flags: 0x4, GresPerJob: 3, GresPerTask: 1,
		MemPerGres: 100, NTasksPerGres: NoVal16, TotalGres: 3, TypeName: "a100", NodeCnt: 2,
		CntNodeAlloc: []uint64{2, 1}, BitAlloc: []*Bitmap{bm(4, 1, 2), bm(4, 0)},
		BitStepAlloc: []*Bitmap{bm(4, 1), nil}, CntStepAlloc: []uint64{1, 0},
	}, {
		PluginID: GresBuildID("shard"), NodeCnt: 2, TotalGres: 5, TypeName: "",
		CntNodeAlloc: []uint64{3, 2}, BitAlloc: []*Bitmap{bm(4, 0, 1), bm(4, 3)},
	}}
	step := []GresStepState{{
		PluginID: GresBuildID("gpu"), GresPerStep: 2, TotalGres: 2, NodeCnt: 2, NodeInUse: bm(2, 0),
		CntNodeAlloc: []uint64{2, 0}, BitAlloc: []*Bitmap{bm(4, 1, 2), nil},
	}}
	if v >= Version2411 {
		job[0].PerBitAlloc = [][]uint64{nil, nil}
		job[0].PerBitStepAlloc = [][]uint64{nil, nil}
		job[1].PerBitAlloc = [][]uint64{{2, 1, 0, 0}, {0, 0, 0, 2}}
		job[1].PerBitStepAlloc = [][]uint64{nil, {0, 0, 0, 1}}
		step[0].TypeName = "a100"
		step[0].PerBitAlloc = [][]uint64{nil, nil}
	}
	return job, step
}

// TestGresStates_RoundTrip packs and decodes records of every spoken
// release and holds the bytes to the codec's structural skip (written
// apart from the decoder): both must consume exactly the same bytes.
func TestGresStates_RoundTrip(t *testing.T) {
	for _, v := range spoken {
		job, step := sampleGres(v)
		jb := EncodeGresJobStates(job, v)
		sb := EncodeGresStepStates(step, v)
		gotJob, err := DecodeGresJobStates(jb, v)
		if err != nil {
			t.Fatalf("v%x job: %v", v, err)
		}
		if !reflect.DeepEqual(gotJob, job) {
			t.Errorf("v%x job:\n got %+v\nwant %+v", v, gotJob, job)
		}
		gotStep, err := DecodeGresStepStates(sb, v)
		if err != nil {
			t.Fatalf("v%x step: %v", v, err)
		}
		if !reflect.DeepEqual(gotStep, step) {
			t.Errorf("v%x step:\n got %+v\nwant %+v", v, gotStep, step)
		}
		for _, c := range []struct {
			b    []byte
			skip func(*Unpacker, uint16) error
		}{{jb, skipGresJobStateRec}, {sb, skipGresStepStateRec}} {
			u := NewUnpacker(c.b)
			raw, err := rawGres(u, v, c.skip)
			if err != nil || u.Done() != nil || !bytes.Equal(raw, c.b) {
				t.Errorf("v%x: skip disagrees: err %v, %d of %d bytes", v, err, u.Offset(), len(c.b))
			}
		}
		// The other release's layout does not decode these bytes cleanly.
		other := Version2205
		if v == Version2205 {
			other = Version2411
		}
		if _, err := DecodeGresJobStates(jb, other); err == nil {
			t.Errorf("v%x job bytes decoded as v%x", v, other)
		}
	}
}

func TestGresStates_BadInput(t *testing.T) {
	job, _ := sampleGres(Version2411)
	good := EncodeGresJobStates(job, Version2411)
	for i := 0; i < len(good); i++ {
		if _, err := DecodeGresJobStates(good[:i], Version2411); err == nil {
			t.Fatalf("truncated at %d of %d: no error", i, len(good))
		}
	}
	bad := append([]byte(nil), good...)
	bad[3] ^= 0xff // magic
	if _, err := DecodeGresJobStates(bad, Version2411); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad magic: %v", err)
	}
	huge := []byte{0xff, 0xff, 0x43, 0x8a, 0x34, 0xd4}
	if _, err := DecodeGresStepStates(huge, Version2205); err == nil {
		t.Error("65535 records in 6 bytes: no error")
	}
	if recs, err := DecodeGresJobStates([]byte{0, 0}, Version2205); err != nil || len(recs) != 0 {
		t.Errorf("empty list: %v %v", recs, err)
	}
}
