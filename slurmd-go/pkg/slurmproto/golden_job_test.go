package slurmproto

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// launchTasksCred decodes a 22.05 REQUEST_LAUNCH_TASKS body and returns
// its credential.
func launchTasksCred(body []byte) (*Cred, error) {
	b, err := DecodeBody(Version2205, RequestLaunchTasks, body)
	if err != nil {
		return nil, err
	}
	return b.(*LaunchTasks).Cred, nil
}

// Golden frames from the private cluster goldjob (testdata/README.md,
// "Batch jobs"): real slurmctld/slurmd/slurmstepd 22.05.8 traffic.

// Times of the capture (UTC 2026-11-29).
var (
	t160604 = time.Unix(1795970164, 0) // jobs 1 and 2 start
	t160612 = time.Unix(1795970172, 0) // array job 3 starts
	t160616 = time.Unix(1795970176, 0) // two-node job 5 starts
	t160627 = time.Unix(1795970187, 0) // job 5 cancelled
	t160642 = time.Unix(1795970202, 0) // srun step 7.0 created
	t160717 = time.Unix(1795970237, 0) // job 1 reaches its time limit
)

func bitmapT(t *testing.T, n int, hex string) *Bitmap {
	t.Helper()
	b, err := ParseHexMask(n, hex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkCred compares a decoded credential with want (ignoring Signed and
// times' locations) and checks the signed-bytes contract: Signed is
// exactly what re-packing the decoded fields gives, i.e. the decoder
// consumed every field and the encoder writes the C layout.
func checkCred(t *testing.T, got, want *Cred) {
	t.Helper()
	if got == nil {
		t.Fatal("no cred")
	}
	fields, err := got.PackFields(Version2205)
	if err != nil || !bytes.Equal(fields, got.Signed) {
		t.Fatalf("PackFields != Signed: %v\n got %x\nwant %x", err, fields, got.Signed)
	}
	g := *got
	g.Signed = nil
	g.CTime = unixOnly(g.CTime)
	w := *want
	w.CTime = unixOnly(w.CTime)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("cred\n got %+v\nwant %+v", g, w)
	}
}

// reencodeFromFields checks that body, with every credential's Signed
// dropped (so that the fields are packed), still encodes to the captured
// bytes.
func reencodeFromFields(t *testing.T, m *Message, b Body) {
	t.Helper()
	switch x := b.(type) {
	case *BatchJobLaunch:
		c := *x.Cred
		c.Signed = nil
		y := *x
		y.Cred = &c
		b = &y
	case *LaunchProlog:
		c := *x.Cred
		c.Signed = nil
		y := *x
		y.Cred = &c
		b = &y
	case *KillJob:
		c := *x.Cred
		c.Signed = nil
		y := *x
		y.Cred = &c
		b = &y
	}
	enc, err := EncodeBody(m.Header.Version, b)
	if err != nil || !bytes.Equal(enc, m.Body) {
		t.Fatalf("encode from fields: %v\n got %x\nwant %x", err, enc, m.Body)
	}
}

// goldEnv is the start of every batch environment: sbatch ran under
// env -i PATH=/usr/bin:/bin HOME=... SLURM_CONF=....
func goldEnv(home, name, nofile string) []string {
	return []string{
		"PATH=/usr/bin:/bin", "HOME=" + home, "SLURM_CONF=/tmp/goldjob/slurm.conf", "SLURM_JOB_NAME=" + name,
		"SLURM_RLIMIT_CPU=18446744073709551615", "SLURM_RLIMIT_FSIZE=18446744073709551615",
		"SLURM_RLIMIT_DATA=18446744073709551615", "SLURM_RLIMIT_STACK=8388608", "SLURM_RLIMIT_CORE=0",
		"SLURM_RLIMIT_RSS=18446744073709551615", "SLURM_RLIMIT_NPROC=96364", "SLURM_RLIMIT_NOFILE=" + nofile,
		"SLURM_RLIMIT_MEMLOCK=8388608", "SLURM_RLIMIT_AS=18446744073709551615", "SLURM_PRIO_PROCESS=0",
	}
}

// batchCred is the credential ctld puts in batch launches and prologs of
// the single-node goldjob jobs.
func batchCred(t *testing.T, job, step uint32, root bool, node, core string, mem uint64, ctime time.Time) *Cred {
	c := &Cred{
		StepID: StepID{JobID: job, StepID: step, StepHetComp: NoVal}, UID: 1002, GID: 1002,
		PwName: "tieegold", PwGecos: EmptyString, PwDir: "/home/tieegold", PwShell: "/bin/bash", Gids: []uint32{1002},
		GresJobState: []byte{0, 0}, GresStepState: []byte{0, 0}, JobCoreSpec: NoVal16, JobPartition: "gj",
		JobStdIn: "/dev/null", StepHostlist: node, CTime: ctime, TotCoreCnt: 2,
		JobCoreBitmap: bitmapT(t, 2, core), StepCoreBitmap: bitmapT(t, 2, core),
		CoresPerSocket: []uint16{2}, SocketsPerNode: []uint16{1}, SockCoreRepCount: []uint32{1},
		CPUArray: []uint16{1}, CPUArrayReps: []uint32{1}, JobNHosts: 1, JobHostlist: node,
		JobMemAlloc: []uint64{mem}, JobMemAllocRepCount: []uint32{1},
	}
	if root {
		c.UID, c.GID, c.PwName, c.PwGecos, c.PwDir, c.Gids = 0, 0, "root", "root", "/root", []uint32{0}
	}
	return c
}

func TestGoldenJob_BatchJobLaunch(t *testing.T) {
	script := func(cmd string) string {
		return "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + cmd + "\n"
	}
	tests := []struct {
		file string
		want BatchJobLaunch
		cred *Cred
	}{
		// sbatch --mem=100 --wrap 'exit 3' as root.
		{"batch_job_launch_v2600.bin", BatchJobLaunch{
			JobID: 2, Partition: "gj", PnMinMemory: 100, ArrayTaskID: NoVal, CPUsPerTask: 1,
			CPUsPerNode: []uint16{1}, CPUCountReps: []uint32{1}, Nodes: "j1", Script: script("exit 3"),
			WorkDir: "/tmp/goldjob/work-root", StdIn: "/dev/null",
			Environment: append(goldEnv("/root", "exit3", "20000"),
				"SLURM_SUBMIT_DIR=/tmp/goldjob", "SLURM_SUBMIT_HOST=vm", "SLURM_UMASK=0022"),
			JobMem: 100, CredVersion: Version2205, SelectPluginID: SelectPluginConsTres,
		}, batchCred(t, 2, StepIDBatch, true, "j1", "0x2", 100, t160604)},
		// sbatch -a 1-2 --mem=50 as tieegold: task 1 is job 4.
		{"batch_job_launch_array_v2600.bin", BatchJobLaunch{
			JobID: 4, UID: 1002, GID: 1002, Partition: "gj", PnMinMemory: 50, ArrayJobID: 3, ArrayTaskID: 1,
			CPUsPerTask: 1, CPUsPerNode: []uint16{1}, CPUCountReps: []uint32{1}, Nodes: "j1",
			Script: script("echo task $SLURM_ARRAY_TASK_ID"), WorkDir: "/tmp/goldjob/work-user", StdIn: "/dev/null",
			Environment: append(goldEnv("/home/tieegold", "arr", "1024"),
				"SLURM_SUBMIT_DIR=/work/main", "SLURM_SUBMIT_HOST=vm", "SLURM_UMASK=0022",
				"SLURM_ARRAY_TASK_COUNT=2", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_MAX=2", "SLURM_ARRAY_TASK_STEP=1"),
			JobMem: 50, CredVersion: Version2205, SelectPluginID: SelectPluginConsTres,
		}, batchCred(t, 4, StepIDBatch, false, "j1", "0x2", 50, t160612)},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, b := decodeGolden(t, tc.file)
			if m.Header.MsgType != RequestBatchJobLaunch || !m.Header.OrigAddr.IsUnspec() {
				t.Fatalf("header %+v", m.Header)
			}
			got := b.(*BatchJobLaunch)
			checkCred(t, got.Cred, tc.cred)
			g := *got
			g.Cred = nil
			if !reflect.DeepEqual(g, tc.want) {
				t.Errorf("\n got %+v\nwant %+v", g, tc.want)
			}
			// Batch creds are unsigned; the batch step's memory is entry 0.
			if got.Cred.Signature != nil || got.Cred.JobMemLimit(0) != got.JobMem {
				t.Errorf("signature %q, mem %d", got.Cred.Signature, got.Cred.JobMemLimit(0))
			}
			reencodeFromFields(t, m, b)
			// From scratch: the expected struct plus the expected cred.
			w := tc.want
			w.Cred = tc.cred
			if enc, err := EncodeBody(Version2205, &w); err != nil || !bytes.Equal(enc, m.Body) {
				t.Fatalf("EncodeBody(from scratch): %v", err)
			}
		})
	}
}

// TestGoldenJob_BatchTwoNodes: sbatch -N2 -n2 --mem=80 as tieegold. The
// batch cred lists both nodes, their cores, but memory only for the batch
// host (one entry, rep count 1), which slurm_cred_get_mem reads as entry 0.
func TestGoldenJob_BatchTwoNodes(t *testing.T) {
	m, b := decodeGolden(t, "batch_job_launch_2node_v2600.bin")
	got := b.(*BatchJobLaunch)
	if got.JobID != 5 || got.NTasks != 2 || got.Nodes != "j[1-2]" || !reflect.DeepEqual(got.CPUsPerNode, []uint16{1}) ||
		!reflect.DeepEqual(got.CPUCountReps, []uint32{2}) || got.PnMinMemory != 80 || got.JobMem != 80 ||
		!strings.HasSuffix(got.Script, "for i in $(seq 60); do sleep 1; done\n") {
		t.Errorf("body %+v", got)
	}
	if env := got.Environment; len(env) != 20 || env[18] != "SLURM_NPROCS=2" || env[19] != "SLURM_NTASKS=2" {
		t.Errorf("environment %q", env)
	}
	c := got.Cred
	if c.StepID != (StepID{JobID: 5, StepID: StepIDBatch, StepHetComp: NoVal}) || c.JobHostlist != "j[1-2]" || c.StepHostlist != "j1" ||
		c.JobNHosts != 2 || c.JobNTasks != 2 || c.TotCoreCnt != 4 || c.JobCoreBitmap.HexMask() != "0x6" ||
		c.StepCoreBitmap.HexMask() != "0x6" || !reflect.DeepEqual(c.SockCoreRepCount, []uint32{2}) ||
		!reflect.DeepEqual(c.CPUArrayReps, []uint32{2}) || !reflect.DeepEqual(c.JobMemAlloc, []uint64{80}) ||
		!reflect.DeepEqual(c.JobMemAllocRepCount, []uint32{1}) || c.StepMemAlloc != nil || unixOnly(c.CTime) != unixOnly(t160616) {
		t.Errorf("cred %+v", *c)
	}
	// j1 got core 1, j2 core 0 (bits 1 and 2 of the 4-bit job bitmap).
	for i, want := range []NodeCores{{Cores: 2, Job: []int{1}, Step: []int{1}}, {Cores: 2, Job: []int{0}, Step: []int{0}}} {
		if nc, ok := c.CoresForNode(i); !ok || !reflect.DeepEqual(nc, want) {
			t.Errorf("CoresForNode(%d) = %+v %v", i, nc, ok)
		}
	}
	if _, ok := c.CoresForNode(2); ok {
		t.Error("CoresForNode(2)")
	}
	if c.JobMemLimit(0) != 80 || c.JobMemLimit(1) != 80 {
		t.Errorf("JobMemLimit %d %d", c.JobMemLimit(0), c.JobMemLimit(1))
	}
	reencodeFromFields(t, m, b)
}

func TestGoldenJob_LaunchProlog(t *testing.T) {
	// PrologFlags=Alloc: the prolog cred has the extern step id.
	m, b := decodeGolden(t, "launch_prolog_v2600.bin")
	got := b.(*LaunchProlog)
	want := LaunchProlog{GresJobAlloc: []byte{0, 0}, JobID: 2, Nodes: "j1", WorkDir: "/tmp/goldjob/work-root", UserName: "root"}
	g := *got
	g.Cred = nil
	if !reflect.DeepEqual(g, want) {
		t.Errorf("\n got %+v\nwant %+v", g, want)
	}
	checkCred(t, got.Cred, batchCred(t, 2, StepIDExtern, true, "j1", "0x2", 100, t160604))
	reencodeFromFields(t, m, b)

	// Two nodes: here the memory array covers both (rep count 2).
	m, b = decodeGolden(t, "launch_prolog_2node_v2600.bin")
	p := b.(*LaunchProlog)
	c := p.Cred
	if p.JobID != 5 || p.Nodes != "j[1-2]" || p.UserName != "tieegold" || p.UID != 1002 ||
		c.StepID != (StepID{JobID: 5, StepID: StepIDExtern, StepHetComp: NoVal}) || c.StepHostlist != "j[1-2]" ||
		!reflect.DeepEqual(c.JobMemAllocRepCount, []uint32{2}) || c.JobMemLimit(1) != 80 || c.JobMemLimit(2) != 0 {
		t.Errorf("prolog %+v\ncred %+v", p, c)
	}
	reencodeFromFields(t, m, b)
}

func TestGoldenJob_KillJob(t *testing.T) {
	// Kill creds: step id NO_VAL, no step hostlist/bitmap, no memory.
	killCred := func(job uint32, root bool, core string, ctime time.Time) *Cred {
		c := batchCred(t, job, NoVal, root, "", core, 0, ctime)
		c.JobHostlist = "j1"
		c.StepCoreBitmap = nil
		c.JobMemAlloc, c.JobMemAllocRepCount = nil, nil
		return c
	}
	tests := []struct {
		file string
		want KillJob
		cred *Cred
	}{
		// exit 3: FAILED|COMPLETING, exit_code = raw status 0x300.
		{"terminate_job_v2600.bin", KillJob{
			Type: RequestTerminateJob, HasCred: true, ExitCode: 0x300, GresJobAlloc: []byte{0, 0},
			StepID: StepID{JobID: 2, StepID: NoVal, StepHetComp: NoVal}, JobState: 0x8005, Nodes: "j1", SelectPluginID: SelectPluginConsTres,
			StartTime: t160604, Time: t160604, WorkDir: "/tmp/goldjob/work-root",
		}, killCred(2, true, "0x2", t160604)},
		// -t 1: TIMEOUT|COMPLETING.
		{"kill_timelimit_v2600.bin", KillJob{
			Type: RequestKillTimelimit, HasCred: true, GresJobAlloc: []byte{0, 0},
			StepID: StepID{JobID: 1, StepID: NoVal, StepHetComp: NoVal}, JobState: 0x8006, JobUID: 1002, JobGID: 1002, Nodes: "j1",
			SelectPluginID: SelectPluginConsTres, StartTime: t160604, Time: t160717, WorkDir: "/tmp/goldjob/work-user",
		}, killCred(1, false, "0x1", t160717)},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, b := decodeGolden(t, tc.file)
			got := b.(*KillJob)
			checkCred(t, got.Cred, tc.cred)
			g := *got
			g.Cred = nil
			g.StartTime, g.Time = unixOnly(g.StartTime), unixOnly(g.Time)
			w := tc.want
			w.StartTime, w.Time = unixOnly(w.StartTime), unixOnly(w.Time)
			if !reflect.DeepEqual(g, w) || m.Header.MsgType != w.Type {
				t.Errorf("\n got %+v\nwant %+v", g, w)
			}
			reencodeFromFields(t, m, b)
		})
	}

	// scancel of the running two-node job: CANCELLED|COMPLETING.
	m, b := decodeGolden(t, "terminate_job_cancelled_v2600.bin")
	k := b.(*KillJob)
	if k.StepID != (StepID{JobID: 5, StepID: NoVal, StepHetComp: NoVal}) || k.JobState != 0x8004 || k.ExitCode != 0 || k.Nodes != "j[1-2]" ||
		k.Cred.JobHostlist != "j[1-2]" || k.Cred.StepHostlist != "" || unixOnly(k.Time) != unixOnly(t160627) {
		t.Errorf("kill %+v\ncred %+v", k, k.Cred)
	}
	if nc, ok := k.Cred.CoresForNode(1); !ok || !reflect.DeepEqual(nc, NodeCores{Cores: 2, Job: []int{0}}) {
		t.Errorf("CoresForNode(1) = %+v %v", nc, ok)
	}
	reencodeFromFields(t, m, b)
}

func TestGoldenJob_Small(t *testing.T) {
	tests := []struct {
		file string
		want Body
	}{
		// scancel -s USR1 (steps only; dummy step MaxStepCount+1).
		{"signal_tasks_v2600.bin", &SignalTasks{Type: RequestSignalTasks, StepID: StepID{JobID: 5, StepID: 40001, StepHetComp: NoVal}, Flags: KillStepsOnly, Signal: 10}},
		// scancel -b -s USR1: the batch step itself.
		{"signal_tasks_batch_v2600.bin", &SignalTasks{Type: RequestSignalTasks, StepID: StepID{JobID: 5, StepID: StepIDBatch, StepHetComp: NoVal}, Flags: KillJobBatch, Signal: 10}},
		{"job_notify_v2600.bin", &JobNotify{StepID: StepID{JobID: 5, StepID: NoVal, StepHetComp: NoVal}, Message: "hello"}},
		{"complete_prolog_v2600.bin", &CompleteProlog{JobID: 2, NodeName: "j1"}},
		// exit 3 -> raw wait status 0x300; jobacct_gather/none -> u8 0.
		{"complete_batch_script_v2600.bin", &CompleteBatchScript{JobID: 2, JobRC: 0x300, NodeName: "j1"}},
		// killed at the time limit by SIGTERM: raw status 15.
		{"complete_batch_script_timeout_v2600.bin", &CompleteBatchScript{JobID: 1, JobRC: 15, UserID: 1002, NodeName: "j1"}},
		{"epilog_complete_v2600.bin", &EpilogComplete{JobID: 2, NodeName: "j1"}},
		// srun -N2 -n2: the j2 stepd reports node rank 1.
		{"step_complete_v2600.bin", &StepComplete{StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}, RangeFirst: 1, RangeLast: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, b := decodeGolden(t, tc.file)
			if m.Header.MsgType != tc.want.MsgType() || !reflect.DeepEqual(b, tc.want) {
				t.Errorf("%v\n got %+v\nwant %+v", m.Header.MsgType, b, tc.want)
			}
			if enc, err := EncodeBody(Version2205, tc.want); err != nil || !bytes.Equal(enc, m.Body) {
				t.Errorf("EncodeBody(want): %v", err)
			}
		})
	}
}

// TestGoldenJob_SignedStepCred: the credential of srun -N2 -n2 --mem=30
// (REQUEST_LAUNCH_TASKS received by j1) is signed; Signed is exactly the
// munge payload (the payload file is what unmunge printed for the
// signature during the capture).
func TestGoldenJob_SignedStepCred(t *testing.T) {
	m, err := DecodeMessage(readGolden(t, "launch_tasks/launch_tasks_2node_v2600.bin")[4:])
	if err != nil || m.Header.MsgType != RequestLaunchTasks {
		t.Fatalf("%v %+v", err, m.Header)
	}
	c, err := launchTasksCred(m.Body)
	if err != nil {
		t.Fatal(err)
	}
	payload := readGolden(t, "launch_tasks/launch_tasks_2node_cred_payload.bin")
	if !bytes.Equal(c.Signed, payload) || len(payload) != 290 {
		t.Fatalf("Signed (%d bytes) != munge payload (%d bytes)", len(c.Signed), len(payload))
	}
	sig := string(c.Signature)
	if !strings.HasPrefix(sig, "MUNGE:") || !strings.HasSuffix(sig, ":\x00") || strings.Count(sig, "\x00") != 1 {
		t.Fatalf("signature %q", sig)
	}
	want := &Cred{
		StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}, UID: 1002, GID: 1002,
		PwName: "tieegold", PwGecos: EmptyString, PwDir: "/home/tieegold", PwShell: "/bin/bash", Gids: []uint32{1002},
		GresJobState: []byte{0, 0}, GresStepState: []byte{0, 0}, JobCoreSpec: NoVal16, JobPartition: "gj",
		StepHostlist: "j[1-2]", CTime: t160642, TotCoreCnt: 4,
		JobCoreBitmap: bitmapT(t, 4, "0x6"), StepCoreBitmap: bitmapT(t, 4, "0x6"),
		CoresPerSocket: []uint16{2}, SocketsPerNode: []uint16{1}, SockCoreRepCount: []uint32{2},
		CPUArray: []uint16{1}, CPUArrayReps: []uint32{2}, JobNHosts: 2, JobNTasks: 2, JobHostlist: "j[1-2]",
		JobMemAlloc: []uint64{30}, JobMemAllocRepCount: []uint32{2},
		StepMemAlloc: []uint64{30}, StepMemAllocRepCount: []uint32{2},
		Signature: c.Signature,
	}
	checkCred(t, c, want)
	for i := 0; i < 2; i++ {
		if j, s := c.MemLimits(i, i); j != 30 || s != 30 {
			t.Errorf("MemLimits(%d) = %d, %d", i, j, s)
		}
	}
	// Re-packing the decoded cred gives the captured bytes (Signed
	// verbatim + signature mem).
	p := NewPacker(0)
	if err := PackCred(p, Version2205, c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(m.Body, p.Bytes()) {
		t.Fatal("re-packed cred not found in the frame")
	}
}
