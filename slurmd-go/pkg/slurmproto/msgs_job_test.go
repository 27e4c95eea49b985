package slurmproto

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gresJobAllocOneRec is a gres_job_alloc_pack list with one record on two
// nodes: counts {1, 2} and bitmaps "0x1", "0x3" of 2 bits.
var gresJobAllocOneRec = mustHexT("0001" + "438a34d4" + "00000007" + "00000002" +
	"01" + "00000002" + "0000000000000001" + "0000000000000002" +
	"01" + "00000002" + "00000004" + "307831" + "00" + "00000002" + "00000004" + "307833" + "00")

// sampleCred is a fully populated credential (Signed left nil so that the
// fields are packed).
func sampleCred() *Cred {
	job := NewBitmap(6)
	for _, i := range []int{0, 1, 2, 4, 5} {
		job.Set(i)
	}
	step := NewBitmap(6)
	step.Set(1)
	step.Set(4)
	return &Cred{
		StepID: StepID{JobID: 9, StepID: 0, StepHetComp: NoVal}, UID: 1002, GID: 1002,
		PwName: "u", PwGecos: EmptyString, PwDir: "/home/u", PwShell: "/bin/bash",
		Gids: []uint32{1002, 27}, GrNames: []string{"u", "sudo"},
		GresJobState: []byte{0, 0}, GresStepState: []byte{0, 0},
		JobCoreSpec: NoVal16, JobAccount: "acct", JobAliasList: "", JobComment: "c",
		JobConstraints: "f1", JobPartition: "p", JobReservation: "r", JobRestartCnt: 1,
		JobStdErr: "e", JobStdIn: "i", JobStdOut: "o", StepHostlist: "n[1-2]", X11: 0,
		CTime: time.Unix(1795970146, 0), TotCoreCnt: 6, JobCoreBitmap: job, StepCoreBitmap: step,
		CoresPerSocket: []uint16{2, 1}, SocketsPerNode: []uint16{2, 2}, SockCoreRepCount: []uint32{1, 1},
		CPUArray: []uint16{4, 2}, CPUArrayReps: []uint32{1, 1},
		JobNHosts: 2, JobNTasks: 3, JobHostlist: "n[1-2]",
		JobMemAlloc: []uint64{100, 50}, JobMemAllocRepCount: []uint32{1, 1},
		StepMemAlloc: []uint64{30}, StepMemAllocRepCount: []uint32{2},
		SELinuxContext: "",
		Signature:      []byte("MUNGE:AAA:\x00"),
	}
}

// jobSampleBodies has one populated value per body type of msgs_job.go. It
// drives TestJobBody_RoundTrip and the FuzzDecodeBody seeds written by
// TestJobFuzzCorpus.
func jobSampleBodies() []Body {
	kill := &KillJob{
		HasCred: true, Cred: sampleCred(), Details: "d", DerivedEC: 1, ExitCode: 0x300,
		GresJobAlloc: gresJobAllocOneRec, StepID: StepID{JobID: 9, StepID: NoVal, StepHetComp: NoVal}, HetJobID: NoVal, JobState: 3,
		JobUID: 1002, JobGID: 1002, Nodes: "n[1-2]", SelectPluginID: SelectPluginConsTres,
		SpankJobEnv: []string{"A=1"}, StartTime: time.Unix(1795970100, 0), Time: time.Unix(1795970146, 0), WorkDir: "/w",
	}
	return []Body{
		&BatchJobLaunch{
			JobID: 9, HetJobID: NoVal, UID: 1002, GID: 1002, Gids: []uint32{1, 2}, Partition: "p", NTasks: 1,
			PnMinMemory: 100, OpenMode: OpenModeAppend, Overcommit: 1, ArrayJobID: 8, ArrayTaskID: 1,
			AcctgFreq: "task=30", CPUBindType: 0, CPUsPerTask: NoVal16, RestartCnt: 0, JobCoreSpec: NoVal16,
			CPUsPerNode: []uint16{4, 2}, CPUCountReps: []uint32{1, 1}, Nodes: "n[1-2]",
			Script: "#!/bin/sh\nexit 3\n", WorkDir: "/w", StdErr: "e", StdIn: "/dev/null", StdOut: "o",
			Argv: []string{"a", EmptyString}, SpankJobEnv: []string{"S=1"}, Environment: []string{"PATH=/bin", "X="},
			JobMem: 100, CredVersion: Version2205, Cred: sampleCred(), SelectPluginID: SelectPluginConsTres,
			Account: "a", QOS: "normal", Profile: 0, TresBind: "gres/gpu:closest", TresFreq: "f",
		},
		&BatchJobLaunch{Cred: &Cred{}},
		kill,
		&KillJob{Type: RequestKillTimelimit, StepID: StepID{JobID: 1, StepID: NoVal, StepHetComp: NoVal}},
		&KillJob{Type: RequestAbortJob, StepID: StepID{JobID: 1, StepID: StepIDBatch, StepHetComp: NoVal}, Nodes: "n1"},
		&KillJob{Type: RequestKillPreempted, GresJobAlloc: []byte{0, 0}},
		&SignalTasks{StepID: StepID{JobID: 7, StepID: 40001, StepHetComp: NoVal}, Flags: KillStepsOnly, Signal: 10},
		&SignalTasks{Type: RequestTerminateTasks, StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}, Signal: 9},
		&JobNotify{StepID: StepID{JobID: 5, StepID: NoVal, StepHetComp: NoVal}, Message: "hello"},
		&LaunchProlog{
			GresJobAlloc: gresJobAllocOneRec, JobID: 9, HetJobID: NoVal, UID: 1002, GID: 1002, Nodes: "n[1-2]",
			StdErr: "e", StdOut: "o", WorkDir: "/w", X11Forwarding: X11Forwarding{X11: 1, X11AllocHost: "h", X11AllocPort: 6000,
				X11MagicCookie: "c", X11Target: "t", X11TargetPort: 6010}, SpankJobEnv: []string{"S=1"},
			Cred: sampleCred(), UserName: "u",
		},
		&CompleteProlog{JobID: 9, NodeName: "n1", PrologRC: 0},
		&CompleteBatchScript{JobID: 9, JobRC: 0x300, UserID: 1002, NodeName: "n1"},
		&CompleteBatchScript{JobAcct: &JobAcct{UserCPUSec: 1, TRESList: []TRESRec{}}, SlurmRC: ESlurmdPrologFailed},
		&JobRequeue{JobID: 9, JobIDStr: "9", Flags: 0x100},
		&StepComplete{StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}, RangeFirst: 0, RangeLast: 1, StepRC: 0x100},
		&SuspendInt{IndfSusp: true, JobCoreSpec: NoVal16, JobID: 9, Op: ResumeJob},
		&JobIDRequest{PID: 4242},
		&JobID{JobID: 9, RC: 0},
	}
}

// credVersions lists the versions a body's layout exists for.
func jobBodyVersions(b Body) []uint16 {
	all := []uint16{Version2011, Version2108, Version2205}
	switch b.(type) {
	case *BatchJobLaunch, *LaunchProlog:
		return []uint16{Version2205}
	}
	return all
}

// jobWant is what decoding the encoding of b at version v should give.
func jobWant(b Body, v uint16) Body {
	switch m := b.(type) {
	case *KillJob:
		c := *m
		c.Type = m.MsgType()
		if v < Version2205 {
			c.HasCred, c.Cred, c.Details, c.DerivedEC, c.ExitCode = false, nil, "", 0, Infinite
		}
		if v < Version2108 {
			c.WorkDir = ""
		}
		if c.GresJobAlloc == nil {
			c.GresJobAlloc = []byte{0, 0}
		}
		if c.Cred != nil {
			c.Cred = credWant(c.Cred)
		}
		return &c
	case *SignalTasks:
		c := *m
		c.Type = m.MsgType()
		return &c
	case *CompleteProlog:
		c := *m
		if v < Version2205 {
			c.NodeName = ""
		}
		return &c
	case *BatchJobLaunch:
		c := *m
		if c.CredVersion == 0 {
			c.CredVersion = v
		}
		c.Cred = credWant(c.Cred)
		return &c
	case *LaunchProlog:
		c := *m
		c.Cred = credWant(c.Cred)
		return &c
	}
	return b
}

// credWant fills what decoding adds to a Cred built in Go: the signed
// bytes, and {0,0} for nil gres lists.
func credWant(c *Cred) *Cred {
	w := *c
	if w.GresJobState == nil {
		w.GresJobState = []byte{0, 0}
	}
	if w.GresStepState == nil {
		w.GresStepState = []byte{0, 0}
	}
	w.Signed, _ = c.PackFields(Version2205)
	return &w
}

func TestJobBody_RoundTrip(t *testing.T) {
	for i, b := range jobSampleBodies() {
		for _, v := range jobBodyVersions(b) {
			t.Run(fmt.Sprintf("%02d-%v-%04x", i, b.MsgType(), v), func(t *testing.T) {
				enc, err := EncodeBody(v, b)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := DecodeBody(v, b.MsgType(), enc)
				if err != nil {
					t.Fatal(err)
				}
				if want := jobWant(b, v); !reflect.DeepEqual(normalize(dec), normalize(want)) {
					t.Fatalf("\n got %+v\nwant %+v", dec, want)
				}
				re, err := EncodeBody(v, dec)
				if err != nil || !bytes.Equal(re, enc) {
					t.Fatalf("re-encode: %v\n got %x\nwant %x", err, re, enc)
				}
			})
		}
	}
}

// TestJobBody_WireLayout pins the byte layout of the small bodies against
// hand-assembled C output (reference §2B, §2D).
func TestJobBody_WireLayout(t *testing.T) {
	tests := []struct {
		name string
		v    uint16
		b    Body
		hex  string
	}{
		// The reference's verified REQUEST_SIGNAL_TASKS sample (scancel -s USR1).
		{"signal tasks", Version2205, &SignalTasks{StepID: StepID{JobID: 7, StepID: 40001, StepHetComp: NoVal}, Flags: KillStepsOnly, Signal: 10},
			"00000007 00009c41 fffffffe 0004 000a"},
		// The reference's verified REQUEST_COMPLETE_BATCH_SCRIPT sample.
		{"complete batch", Version2205, &CompleteBatchScript{JobID: 1, JobRC: 0x300, NodeName: "n2"},
			"00 00000001 00000300 00000000 00000000 00000003 6e3200"},
		{"complete prolog 22.05", Version2205, &CompleteProlog{JobID: 2, NodeName: "n1", PrologRC: 1},
			"00000002 00000003 6e3100 00000001"},
		{"complete prolog 21.08", Version2108, &CompleteProlog{JobID: 2, NodeName: "n1", PrologRC: 1},
			"00000002 00000001"},
		{"step complete", Version2205, &StepComplete{StepID: StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}},
			"00000001 00000000 fffffffe 00000000 00000000 00000000 00"},
		{"notify", Version2205, &JobNotify{StepID: StepID{JobID: 5, StepID: NoVal, StepHetComp: NoVal}, Message: "hi"},
			"00000005 fffffffe fffffffe 00000003 686900"},
		{"requeue", Version2205, &JobRequeue{JobID: 3, Flags: 0x100}, "00000003 00000000 00000100"},
		{"suspend", Version2205, &SuspendInt{JobCoreSpec: NoVal16, JobID: 4, Op: ResumeJob}, "00 fffe 00000004 0001"},
		{"job id req", Version2205, &JobIDRequest{PID: 0x1234}, "00001234"},
		{"job id resp", Version2205, &JobID{JobID: 7, RC: 1}, "00000007 00000001"},
		{"kill 20.11", Version2011, &KillJob{StepID: StepID{JobID: 1, StepID: NoVal, StepHetComp: NoVal}, HetJobID: NoVal, Nodes: "n1", SelectPluginID: SelectPluginConsTres, WorkDir: "/dropped"},
			"0000 00000001 fffffffe fffffffe fffffffe 00000000 00000000 00000000 00000003 6e3100 0000006d 00000000 0000000000000000 0000000000000000"},
		{"kill 21.08", Version2108, &KillJob{StepID: StepID{JobID: 1, StepID: NoVal, StepHetComp: NoVal}, HetJobID: NoVal, Nodes: "n1", SelectPluginID: SelectPluginConsTres},
			"0000 00000001 fffffffe fffffffe fffffffe 00000000 00000000 00000000 00000003 6e3100 0000006d 00000000 0000000000000000 0000000000000000 00000000"},
		{"kill 22.05 no cred", Version2205, &KillJob{StepID: StepID{JobID: 1, StepID: NoVal, StepHetComp: NoVal}, HetJobID: NoVal, SelectPluginID: SelectPluginConsTres},
			"00 00000000 00000000 00000000 0000 00000001 fffffffe fffffffe fffffffe 00000000 00000000 00000000 00000000 0000006d 00000000 0000000000000000 0000000000000000 00000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := mustHexT(strings.ReplaceAll(tc.hex, " ", ""))
			got, err := EncodeBody(tc.v, tc.b)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v\n got %x\nwant %x", err, got, want)
			}
		})
	}
}

func TestJobBody_Errors(t *testing.T) {
	good, err := EncodeBody(Version2205, jobSampleBodies()[0])
	if err != nil {
		t.Fatal(err)
	}
	// argc is the u32 right before the argv string array; find it by
	// re-encoding with a different argc.
	b := jobSampleBodies()[0].(*BatchJobLaunch)
	argcAt := bytes.Index(good, mustHexT("00000002"+"00000002"+"0000000261"))
	if argcAt < 0 {
		t.Fatal("argc not found")
	}
	badArgc := append([]byte(nil), good...)
	badArgc[argcAt+3] = 3

	encErrs := []struct {
		name string
		v    uint16
		b    Body
		want error
	}{
		{"batch without cred", Version2205, &BatchJobLaunch{}, ErrMalformed},
		{"batch cpu groups", Version2205, &BatchJobLaunch{CPUsPerNode: []uint16{1}, Cred: &Cred{}}, ErrMalformed},
		{"batch old version", Version2108, b, ErrNoLayout},
		{"kill HasCred without cred", Version2205, &KillJob{HasCred: true}, ErrMalformed},
		{"kill bad gres", Version2205, &KillJob{GresJobAlloc: []byte{0, 1}}, ErrShortBuffer},
		{"kill gres trailing", Version2205, &KillJob{GresJobAlloc: []byte{0, 0, 0}}, ErrMalformed},
		{"cred gr_names", Version2205, &KillJob{Cred: &Cred{Gids: []uint32{1, 2}, GrNames: []string{"a"}}}, ErrMalformed},
		{"cred core arrays", Version2205, &KillJob{Cred: &Cred{CoresPerSocket: []uint16{1}}}, ErrMalformed},
		{"cred cpu arrays", Version2205, &KillJob{Cred: &Cred{CPUArray: []uint16{1}}}, ErrMalformed},
		{"cred mem arrays", Version2205, &KillJob{Cred: &Cred{StepMemAlloc: []uint64{1}}}, ErrMalformed},
		{"cred cred_version", Version2205, &BatchJobLaunch{CredVersion: Version2108, Cred: &Cred{}}, ErrUnsupportedVersion},
		{"prolog without cred", Version2205, &LaunchProlog{}, ErrMalformed},
	}
	for _, tc := range encErrs {
		t.Run("encode "+tc.name, func(t *testing.T) {
			if _, err := EncodeBody(tc.v, tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}

	decErrs := []struct {
		name string
		typ  MsgType
		body []byte
		want error
	}{
		{"argc mismatch", RequestBatchJobLaunch, badArgc, ErrMalformed},
		{"truncated batch", RequestBatchJobLaunch, good[:len(good)-1], ErrShortBuffer},
		{"gres bad magic", RequestLaunchProlog, mustHexT("0001 12345678"), ErrMalformed},
		{"gres huge rec_cnt", RequestTerminateJob, mustHexT("00 00000000 00000000 00000000 ffff"), ErrShortBuffer},
		{"kill truncated cred", RequestTerminateJob, mustHexT("01 00000001"), ErrShortBuffer},
	}
	for _, tc := range decErrs {
		t.Run("decode "+tc.name, func(t *testing.T) {
			if _, err := DecodeBody(Version2205, tc.typ, tc.body); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Every strict prefix of every sample fails cleanly.
	for _, s := range jobSampleBodies() {
		enc, err := EncodeBody(Version2205, s)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(enc); n++ {
			if _, err := DecodeBody(Version2205, s.MsgType(), enc[:n]); err == nil {
				t.Fatalf("%v: prefix %d/%d decoded", s.MsgType(), n, len(enc))
			}
		}
	}
}

func TestCred_DecodeOldVersion(t *testing.T) {
	if _, err := DecodeCred(NewUnpacker(make([]byte, 64)), Version2108); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("got %v", err)
	}
	if err := PackCred(NewPacker(0), Version2011, &Cred{}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("got %v", err)
	}
}

// TestCred_SignedVerbatim: PackCred re-sends Signed, not the fields, so a
// forwarded credential keeps its signature valid even if fields changed.
func TestCred_SignedVerbatim(t *testing.T) {
	c := sampleCred()
	p := NewPacker(0)
	if err := PackCred(p, Version2205, c); err != nil {
		t.Fatal(err)
	}
	d, err := DecodeCred(NewUnpacker(p.Bytes()), Version2205)
	if err != nil {
		t.Fatal(err)
	}
	fields, _ := c.PackFields(Version2205)
	if !bytes.Equal(d.Signed, fields) || !bytes.Equal(d.Signature, c.Signature) {
		t.Fatalf("signed %x\nfields %x", d.Signed, fields)
	}
	d.UID = 0 // a changed field does not change what is sent
	p2 := NewPacker(0)
	if err := PackCred(p2, Version2205, d); err != nil || !bytes.Equal(p2.Bytes(), p.Bytes()) {
		t.Fatalf("re-pack: %v", err)
	}
	d.Signed = nil
	p3 := NewPacker(0)
	if err := PackCred(p3, Version2205, d); err != nil || bytes.Equal(p3.Bytes(), p.Bytes()) {
		t.Fatalf("fields not re-packed: %v", err)
	}
}

func TestCred_MemLimits(t *testing.T) {
	c := &Cred{
		StepID:      StepID{JobID: 9, StepID: 0, StepHetComp: NoVal},
		JobMemAlloc: []uint64{100, 200, 300}, JobMemAllocRepCount: []uint32{2, 1, 3},
		StepMemAlloc: []uint64{10, 0}, StepMemAllocRepCount: []uint32{1, 2},
	}
	tests := []struct {
		node            int
		job, step       uint64
		jobAll, stepAll uint64 // MemLimits(node, node)
	}{
		{0, 100, 10, 100, 10},
		{1, 100, 0, 100, 100}, // step 0 falls back to the job limit
		{2, 200, 0, 200, 200},
		{3, 300, 0, 300, 300}, // beyond the step rep counts
		{5, 300, 0, 300, 300},
		{6, 0, 0, 0, 0}, // beyond the job rep counts
		{-1, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.node), func(t *testing.T) {
			if got := c.JobMemLimit(tc.node); got != tc.job {
				t.Errorf("JobMemLimit = %d, want %d", got, tc.job)
			}
			if got := c.StepMemLimit(tc.node); got != tc.step {
				t.Errorf("StepMemLimit = %d, want %d", got, tc.step)
			}
			if j, s := c.MemLimits(tc.node, tc.node); j != tc.jobAll || s != tc.stepAll {
				t.Errorf("MemLimits = %d, %d, want %d, %d", j, s, tc.jobAll, tc.stepAll)
			}
		})
	}
	// Batch creds always use entry 0 (slurm_cred_get_mem).
	b := &Cred{StepID: StepID{JobID: 9, StepID: StepIDBatch, StepHetComp: NoVal}, JobMemAlloc: []uint64{100, 50}, JobMemAllocRepCount: []uint32{1, 1}}
	if b.JobMemLimit(1) != 100 || b.JobMemLimit(7) != 100 {
		t.Errorf("batch JobMemLimit %d %d", b.JobMemLimit(1), b.JobMemLimit(7))
	}
	if (&Cred{StepID: StepID{JobID: 9, StepID: StepIDBatch, StepHetComp: NoVal}}).JobMemLimit(0) != 0 {
		t.Error("empty batch cred")
	}
}

func TestCred_CoresForNode(t *testing.T) {
	// Node layouts: n1, n2 have 2 sockets × 2 cores (bits 0-3, 4-7), n3
	// has 1 × 4 (bits 8-11). Job: n1 cores 0,1,3; n2 none; n3 0-3.
	// Step: n1 core 1, n3 cores 2,3.
	job, _ := ParseHexMask(12, "0xF0B")
	step, _ := ParseHexMask(12, "0xC02")
	c := &Cred{
		JobNHosts: 3, JobCoreBitmap: job, StepCoreBitmap: step,
		SocketsPerNode: []uint16{2, 1}, CoresPerSocket: []uint16{2, 4}, SockCoreRepCount: []uint32{2, 1},
	}
	tests := []struct {
		node int
		ok   bool
		want NodeCores
	}{
		{0, true, NodeCores{Cores: 4, Job: []int{0, 1, 3}, Step: []int{1}}},
		{1, true, NodeCores{Cores: 4}},
		{2, true, NodeCores{Cores: 4, Job: []int{0, 1, 2, 3}, Step: []int{2, 3}}},
		{3, false, NodeCores{}},
		{-1, false, NodeCores{}},
	}
	for _, tc := range tests {
		got, ok := c.CoresForNode(tc.node)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("node %d: got %+v %v, want %+v %v", tc.node, got, ok, tc.want, tc.ok)
		}
	}
	// JobNHosts larger than the rep arrays cover, and nil bitmaps.
	c2 := &Cred{JobNHosts: 5, SocketsPerNode: []uint16{1}, CoresPerSocket: []uint16{2}, SockCoreRepCount: []uint32{1}}
	if _, ok := c2.CoresForNode(1); ok {
		t.Error("node beyond rep arrays")
	}
	if got, ok := c2.CoresForNode(0); !ok || got.Cores != 2 || got.Job != nil || got.Step != nil {
		t.Errorf("nil bitmaps: %+v %v", got, ok)
	}
}

// TestCred_GresRecords: credentials with GRES carry records that must be
// skipped exactly and kept raw.
func TestCred_GresRecords(t *testing.T) {
	jobState := mustHexT("0001" + "438a34d4" + "00000007" + "0001" + "0000" +
		"0000000000000000" + "0000000000000001" + "0000000000000000" + "0000000000000000" + "0000000000000000" +
		"fffe" + "0000000000000001" + "00000004" + "67707500" + "00000001" +
		"01" + "00000001" + "0000000000000001" +
		"01" + "00000002" + "00000004" + "307831" + "00" +
		"00" + "00")
	stepState := mustHexT("0001" + "438a34d4" + "00000007" + "0001" + "0000" +
		"0000000000000000" + "0000000000000001" + "0000000000000000" + "0000000000000000" + "0000000000000000" + "0000000000000001" +
		"00000001" + "00000001" + "00000004" + "307831" + "00" +
		"01" + "00000001" + "0000000000000001" +
		"01" + "fffffffe")
	c := sampleCred()
	c.GresJobState, c.GresStepState = jobState, stepState
	p := NewPacker(0)
	if err := PackCred(p, Version2205, c); err != nil {
		t.Fatal(err)
	}
	d, err := DecodeCred(NewUnpacker(p.Bytes()), Version2205)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.GresJobState, jobState) || !bytes.Equal(d.GresStepState, stepState) || d.SELinuxContext != "" || d.JobHostlist != "n[1-2]" {
		t.Fatalf("got %+v", d)
	}
	// With the bitmap-count flag set and node_cnt huge, the count is
	// bounded by the input.
	bad := append([]byte(nil), jobState...)
	copy(bad[len(bad)-27:], mustHexT("fffffffd"))
	if _, err := rawGres(NewUnpacker(bad), Version2205, skipGresJobStateRec); err == nil {
		t.Fatal("huge node_cnt accepted")
	}
}

// TestJobFuzzCorpus writes (with -update-corpus) or checks the
// FuzzDecodeBody seeds for jobSampleBodies. The golden frames' seeds are
// handled by TestFuzzCorpus.
func TestJobFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeBody")
	for i, b := range jobSampleBodies() {
		for _, v := range jobBodyVersions(b) {
			enc, err := EncodeBody(v, b)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fmt.Sprintf("seed-job%02d-%04x", i, v))
			if !*updateCorpus {
				if _, err := os.Stat(path); err != nil {
					t.Errorf("missing seed %s (run with -update-corpus)", path)
				}
				continue
			}
			content := fmt.Sprintf("go test fuzz v1\nuint16(%d)\nuint16(%d)\n[]byte(%s)\n", v, uint16(b.MsgType()), strconv.Quote(string(enc)))
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
