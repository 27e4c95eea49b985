package slurmproto

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Golden frames of srun steps (testdata/README.md, "srun steps"): real
// srun/slurmd/slurmstepd 22.05.8 traffic. They live in testdata/launch_tasks/
// so that the generic golden and fuzz-corpus tests (testdata/*.bin) do not
// need committed seeds for them; TestGoldenLaunch_RoundTrip and
// FuzzDecodeLaunchTasks cover them here.

// srunEnvHead is the start of every captured srun task environment: srun
// ran under env -i PATH=/usr/bin:/bin HOME=/home/tieegold SLURM_CONF=conf.
func srunEnvHead(conf string) []string {
	return []string{
		"PATH=/usr/bin:/bin", "HOME=/home/tieegold", "SLURM_CONF=" + conf, "SLURM_MPI_TYPE=none",
		"SLURM_RLIMIT_CPU=18446744073709551615", "SLURM_RLIMIT_FSIZE=18446744073709551615",
		"SLURM_RLIMIT_DATA=18446744073709551615", "SLURM_RLIMIT_STACK=8388608", "SLURM_RLIMIT_CORE=0",
		"SLURM_RLIMIT_RSS=18446744073709551615", "SLURM_RLIMIT_NPROC=96364", "SLURM_RLIMIT_NOFILE=1024",
		"SLURM_RLIMIT_MEMLOCK=8388608", "SLURM_RLIMIT_AS=18446744073709551615", "SLURM_PRIO_PROCESS=0",
		"SRUN_DEBUG=3", "SLURM_UMASK=0022",
	}
}

// launchTasksCommon is what every captured non-het srun launch has in
// common (no het job, default distribution knobs, switch/none, cons_tres).
func launchTasksCommon() LaunchTasks {
	return LaunchTasks{
		UID: 1002, GID: 1002,
		HetJobID: NoVal, HetJobNNodes: NoVal, HetJobNTasks: NoVal, HetJobOffset: NoVal,
		HetJobStepCnt: 1, HetJobTaskOffset: NoVal, MPIPluginID: 101, // mpi/none
		NTasksPerCore: Infinite16, NTasksPerSocket: Infinite16, CPUsPerTask: 1, ThreadsPerCore: NoVal16,
		CredVersion: Version2205, Flags: LaunchBufferedIO, SwitchPluginID: SwitchPluginNone,
		CPUFreqMin: NoVal, CPUFreqMax: NoVal, CPUFreqGov: NoVal, SelectPluginID: SelectPluginConsTres,
	}
}

// checkGoldenReencode checks that body b of frame m re-encodes to the
// captured bytes, both with the credential's Signed bytes and from its
// fields, and that the frame is rebuilt byte for byte.
func checkGoldenReencode(t *testing.T, frame []byte, m *Message, b Body) {
	t.Helper()
	enc, err := EncodeBody(m.Header.Version, b)
	if err != nil || !bytes.Equal(enc, m.Body) {
		t.Fatalf("EncodeBody: %v\n got %x\nwant %x", err, enc, m.Body)
	}
	if re := EncodeMessage(m.Header, m.Auth, enc); !bytes.Equal(re, frame) {
		t.Fatal("EncodeMessage differs from the captured frame")
	}
	var c *Cred
	switch x := b.(type) {
	case *LaunchTasks:
		c = x.Cred
		y := *x
		cc := *c
		cc.Signed = nil
		y.Cred = &cc
		b = &y
	case *ReattachTasks:
		c = x.Cred
		y := *x
		cc := *c
		cc.Signed = nil
		y.Cred = &cc
		b = &y
	default:
		return
	}
	if fields, err := c.PackFields(Version2205); err != nil || !bytes.Equal(fields, c.Signed) {
		t.Fatalf("PackFields != Signed: %v", err)
	}
	if enc, err := EncodeBody(m.Header.Version, b); err != nil || !bytes.Equal(enc, m.Body) {
		t.Fatalf("encode from cred fields: %v", err)
	}
}

func decodeGoldenFrame(t *testing.T, name string) ([]byte, *Message, Body) {
	t.Helper()
	frame := readGolden(t, name)
	m, b := decodeGolden(t, name)
	return frame, m, b
}

// TestGoldenLaunch_LaunchTasks2Node: srun -N2 -n2 --mem=30 true as
// tieegold (job 7, cluster goldjob), as received by j1. Every field is
// checked; the credential's Signed bytes are the munge payload of its
// signature.
func TestGoldenLaunch_LaunchTasks2Node(t *testing.T) {
	frame, m, b := decodeGoldenFrame(t, "launch_tasks/launch_tasks_2node_v2600.bin")
	h := m.Header
	if h.MsgType != RequestLaunchTasks || h.Version != Version2205 || h.Forward.Count != 0 || !h.OrigAddr.IsUnspec() {
		t.Fatalf("header %+v", h)
	}
	got := b.(*LaunchTasks)
	want := launchTasksCommon()
	want.StepID = StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}
	want.NTasks, want.NNodes = 2, 2
	want.TaskDist = 1 // SLURM_DIST_CYCLIC (srun's default for -n == -N)
	want.TasksToLaunch = []uint16{1, 1}
	want.GlobalTaskIDs = [][]uint32{{0}, {1}}
	want.RespPorts = []uint16{34739}
	want.Env = append(srunEnvHead("/tmp/goldjob/slurm.conf"),
		"SLURM_CLUSTER_NAME=goldjob", "SLURM_SUBMIT_DIR=/tmp/goldjob/work-user", "SLURM_SUBMIT_HOST=vm",
		"SLURM_JOB_NAME=true", "SLURM_JOB_CPUS_PER_NODE=1(x2)", "SLURM_NTASKS=2", "SLURM_NPROCS=2",
		"SLURM_DISTRIBUTION=cyclic", "SLURM_JOB_ID=7", "SLURM_JOBID=7", "SLURM_STEP_ID=0", "SLURM_STEPID=0",
		"SLURM_NNODES=2", "SLURM_JOB_NUM_NODES=2", "SLURM_NODELIST=j[1-2]", "SLURM_JOB_PARTITION=gj",
		"SLURM_TASKS_PER_NODE=1(x2)", "SLURM_JOB_UID=1002", "SLURM_JOB_USER=tieegold",
		"SLURM_WORKING_CLUSTER=goldjob:localhost:17917:9728:109", "SLURM_JOB_NODELIST=j[1-2]",
		"SLURM_STEP_NODELIST=j[1-2]", "SLURM_STEP_NUM_NODES=2", "SLURM_STEP_NUM_TASKS=2",
		"SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_STEP_LAUNCHER_PORT=34739", "SLURM_SRUN_COMM_PORT=34739")
	want.Cwd = "/tmp/goldjob/work-user"
	want.Argv = []string{"true"}
	want.IOPorts = []uint16{41975}
	want.CompleteNodelist = "j[1-2]"
	g := *got
	g.Cred = nil
	if !reflect.DeepEqual(g, want) {
		t.Errorf("\n got %+v\nwant %+v", g, want)
	}
	// The details of this credential are checked by
	// TestGoldenJob_SignedStepCred; here: it is the step's, and Signed is
	// what munge signed.
	payload := readGolden(t, "launch_tasks/launch_tasks_2node_cred_payload.bin")
	c := got.Cred
	if c.StepID != got.StepID || c.JobHostlist != "j[1-2]" || !bytes.Equal(c.Signed, payload) || len(payload) != 290 {
		t.Errorf("cred %+v", c)
	}
	if sig := string(c.Signature); !strings.HasPrefix(sig, "MUNGE:") || !strings.HasSuffix(sig, ":\x00") {
		t.Errorf("signature %q", sig)
	}
	checkGoldenReencode(t, frame, m, b)
	// From scratch: the expected struct plus the decoded credential
	// rebuilt from its fields.
	cc := *c
	cc.Signed = nil
	want.Cred = &cc
	if enc, err := EncodeBody(Version2205, &want); err != nil || !bytes.Equal(enc, m.Body) {
		t.Fatalf("EncodeBody(from scratch): %v", err)
	}
}

// TestGoldenLaunch_LaunchTasks1Node: srun -N1 -n2 sh -c 'exit 3' as
// tieegold (job 1, cluster goldlt): two tasks on one node.
func TestGoldenLaunch_LaunchTasks1Node(t *testing.T) {
	frame, m, b := decodeGoldenFrame(t, "launch_tasks/launch_tasks_1node_v2600.bin")
	got := b.(*LaunchTasks)
	want := launchTasksCommon()
	want.StepID = StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}
	want.NTasks, want.NNodes = 2, 1
	want.TaskDist = 0x2000 // SLURM_DIST_UNKNOWN: one node, no -m given
	want.TasksToLaunch = []uint16{2}
	want.GlobalTaskIDs = [][]uint32{{0, 1}}
	want.RespPorts = []uint16{44295}
	want.Cwd = "/tmp/goldlt/work-user"
	want.Argv = []string{"sh", "-c", "exit 3"}
	want.IOPorts = []uint16{46119}
	want.CompleteNodelist = "j1"
	g := *got
	g.Cred, g.Env = nil, nil
	if !reflect.DeepEqual(g, want) {
		t.Errorf("\n got %+v\nwant %+v", g, want)
	}
	env := got.Env
	if len(env) != 43 || !reflect.DeepEqual(env[:17], srunEnvHead("/tmp/goldlt/slurm.conf")) ||
		env[len(env)-1] != "SLURM_SRUN_COMM_PORT=44295" || env[20] != "SLURM_JOB_NAME=sh" {
		t.Errorf("env %q", env)
	}
	c := got.Cred
	want1 := &Cred{
		StepID: StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}, UID: 1002, GID: 1002,
		PwName: "tieegold", PwGecos: EmptyString, PwDir: "/home/tieegold", PwShell: "/bin/bash", Gids: []uint32{1002},
		GresJobState: []byte{0, 0}, GresStepState: []byte{0, 0}, JobCoreSpec: NoVal16, JobPartition: "gj",
		StepHostlist: "j1", CTime: time.Unix(1795979553, 0), TotCoreCnt: 2,
		JobCoreBitmap: bitmapT(t, 2, "0x3"), StepCoreBitmap: bitmapT(t, 2, "0x3"),
		CoresPerSocket: []uint16{2}, SocketsPerNode: []uint16{1}, SockCoreRepCount: []uint32{1},
		CPUArray: []uint16{2}, CPUArrayReps: []uint32{1}, JobNHosts: 1, JobNTasks: 2, JobHostlist: "j1",
		// No --mem and CR_Core_Memory: the whole node (RealMemory=1000).
		JobMemAlloc: []uint64{1000}, JobMemAllocRepCount: []uint32{1},
		StepMemAlloc: []uint64{1000}, StepMemAllocRepCount: []uint32{1},
		Signature: c.Signature,
	}
	checkCred(t, c, want1)
	if payload := readGolden(t, "launch_tasks/launch_tasks_1node_cred_payload.bin"); !bytes.Equal(c.Signed, payload) {
		t.Errorf("Signed (%d bytes) != munge payload (%d bytes)", len(c.Signed), len(payload))
	}
	checkGoldenReencode(t, frame, m, b)
}

// TestGoldenLaunch_StepdToSrun: what the stepds sent to srun for
// srun -N1 -n2 sh -c 'exit 3' (job 1 on j1) and
// srun -N2 -n2 sh -c 'exit $SLURM_PROCID' (job 2; j2 runs task 1).
func TestGoldenLaunch_StepdToSrun(t *testing.T) {
	tests := []struct {
		file string
		want Body
	}{
		{"launch_tasks/launch_tasks_response_2task_v2600.bin", &LaunchTasksResponse{
			StepID: StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}, NodeName: "j1", LocalPIDs: []uint32{9496, 9497}, TaskIDs: []uint32{0, 1}}},
		{"launch_tasks/launch_tasks_response_v2600.bin", &LaunchTasksResponse{
			StepID: StepID{JobID: 2, StepID: 0, StepHetComp: NoVal}, NodeName: "j2", LocalPIDs: []uint32{9568}, TaskIDs: []uint32{1}}},
		// Both tasks exited 3: one message, raw wait status 0x300.
		{"launch_tasks/task_exit_2task_v2600.bin", &TaskExit{ReturnCode: 0x300, TaskIDs: []uint32{0, 1}, StepID: StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}}},
		{"launch_tasks/task_exit_v2600.bin", &TaskExit{ReturnCode: 0x100, TaskIDs: []uint32{1}, StepID: StepID{JobID: 2, StepID: 0, StepHetComp: NoVal}}},
		// sattach 3.0 (srun -n1 sleep 12 running on j2): j2's reply.
		{"launch_tasks/reattach_tasks_response_v2600.bin", &ReattachTasksResponse{
			NodeName: "j2", GTIDs: []uint32{0}, LocalPIDs: []uint32{9627}, Executables: []string{"sleep"}}},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			frame, m, b := decodeGoldenFrame(t, tc.file)
			if m.Header.MsgType != tc.want.MsgType() || !reflect.DeepEqual(b, tc.want) {
				t.Errorf("%v\n got %+v\nwant %+v", m.Header.MsgType, b, tc.want)
			}
			checkGoldenReencode(t, frame, m, tc.want)
		})
	}
}

// TestGoldenLaunch_ReattachTasks: sattach 3.0 → j2. The credential is
// sattach's fake one, signed by munge as the user; its signature is the
// I/O key.
func TestGoldenLaunch_ReattachTasks(t *testing.T) {
	frame, m, b := decodeGoldenFrame(t, "launch_tasks/reattach_tasks_v2600.bin")
	got := b.(*ReattachTasks)
	if got.StepID != (StepID{JobID: 3, StepID: 0, StepHetComp: NoVal}) || !reflect.DeepEqual(got.RespPorts, []uint16{33679}) ||
		!reflect.DeepEqual(got.IOPorts, []uint16{37279}) {
		t.Errorf("%+v", got)
	}
	c := got.Cred
	// _generate_fake_cred: uid only (gid 0), one core per node, no cpu
	// array, no tasks, no memory.
	want := &Cred{
		StepID: StepID{JobID: 3, StepID: 0, StepHetComp: NoVal}, UID: 1002,
		PwName: "tieegold", PwGecos: EmptyString, PwDir: "/home/tieegold", PwShell: "/bin/bash", Gids: []uint32{1002},
		GresJobState: []byte{0, 0}, GresStepState: []byte{0, 0}, StepHostlist: "j2",
		CTime: time.Unix(1795979558, 0), TotCoreCnt: 1,
		JobCoreBitmap: bitmapT(t, 1, "0x1"), StepCoreBitmap: bitmapT(t, 1, "0x1"),
		CoresPerSocket: []uint16{1}, SocketsPerNode: []uint16{1}, SockCoreRepCount: []uint32{1},
		JobNHosts: 1, JobHostlist: "j2",
		Signature: c.Signature,
	}
	checkCred(t, c, want)
	if payload := readGolden(t, "launch_tasks/reattach_tasks_cred_payload.bin"); !bytes.Equal(c.Signed, payload) {
		t.Errorf("Signed (%d bytes) != munge payload (%d bytes)", len(c.Signed), len(payload))
	}
	if sig := string(c.Signature); len(sig) < 8 || !strings.HasPrefix(sig, "MUNGE:") || !strings.HasSuffix(sig, ":\x00") {
		t.Errorf("signature %q", sig)
	}
	checkGoldenReencode(t, frame, m, b)
}

// TestGoldenLaunch_RoundTrip: every frame in testdata/launch_tasks decodes
// with nothing left over and re-encodes byte for byte.
func TestGoldenLaunch_RoundTrip(t *testing.T) {
	files, err := filepath.Glob("testdata/launch_tasks/*_v2600.bin")
	if err != nil || len(files) < 8 {
		t.Fatalf("golden files: %v %v", files, err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(filepath.ToSlash(f), "testdata/")
		t.Run(filepath.Base(f), func(t *testing.T) {
			frame, m, b := decodeGoldenFrame(t, name)
			if m.Auth.PluginID != AuthPluginMunge || int(m.Header.BodyLength) != len(m.Body) {
				t.Errorf("auth %d, body_length %d of %d", m.Auth.PluginID, m.Header.BodyLength, len(m.Body))
			}
			checkGoldenReencode(t, frame, m, b)
		})
	}
}

// launchSampleBodies has populated values of every body type of
// msgs_launch.go, including the parts the captures leave empty (het job,
// job options, an IPv4 orig_addr, file names, X11).
func launchSampleBodies() []Body {
	full := &LaunchTasks{
		StepID: StepID{JobID: 9, StepID: 2, StepHetComp: 1}, UID: 1002, GID: 1002, UserName: "u", Gids: []uint32{1002, 27},
		HetJobNodeOffset: 1, HetJobID: 8, HetJobNNodes: 3, HetJobTIDs: [][]uint32{{0, 1}, {2}, nil},
		HetJobNTasks: 3, HetJobTIDOffsets: []uint32{0, 0, 1}, HetJobOffset: 1, HetJobStepCnt: 2, HetJobTaskOffset: 2,
		HetJobNodeList: "n[1-3]", MPIPluginID: 101, NTasks: 3, NTasksPerBoard: 1, NTasksPerCore: 2,
		NTasksPerTRES: 3, NTasksPerSocket: 4, JobMemLim: 100 | MemPerCPU, StepMemLim: 50, NNodes: 2,
		CPUsPerTask: 2, TresPerTask: "cpu:2", ThreadsPerCore: 1, TaskDist: 1, NodeCPUs: 4, JobCoreSpec: NoVal16,
		AccelBindType: 1, CredVersion: Version2205, Cred: sampleCred(),
		TasksToLaunch: []uint16{2, 1}, GlobalTaskIDs: [][]uint32{{0, 2}, {1}}, RespPorts: []uint16{1000, 1001},
		OrigAddr: AddrFrom(netip.MustParseAddrPort("10.1.2.3:4567")),
		Env:      []string{"A=1", EmptyString}, SpankJobEnv: []string{"S=1"}, Container: "/c", Cwd: "/w",
		CPUBindType: 4, CPUBind: "0x1,0x2", MemBindType: 2, MemBind: "local", Argv: []string{"a", "b c"},
		Flags: LaunchLabelIO | LaunchBufferedIO | LaunchMultiProg, OFName: "out-%t", EFName: "err-%t", IFName: "in",
		IOPorts: []uint16{2000}, Profile: 1, TaskProlog: "/tp", TaskEpilog: "/te", SlurmdDebug: 3,
		SwitchPluginID: SwitchPluginNone,
		JobOptions:     []JobOption{{Type: 1, Opt: "opt", Arg: "arg"}, {Type: 2, Opt: "flag"}},
		AliasList:      "n1:10.0.0.1:n1", CompleteNodelist: "n[1-2]", OpenMode: OpenModeTruncate, AcctgFreq: "task=30",
		CPUFreqMin: 1, CPUFreqMax: 2, CPUFreqGov: 3, SelectPluginID: SelectPluginConsTres,
		TresBind: "gres/gpu:closest", TresFreq: "gpu:high", X11Forwarding: X11Forwarding{X11: 1, X11AllocHost: "h", X11AllocPort: 6000,
			X11MagicCookie: "cookie", X11Target: "t", X11TargetPort: 6010},
	}
	return []Body{
		full,
		// Minimal: zero values (SwitchPluginID 0 and CredVersion 0 take
		// their defaults), an empty credential.
		&LaunchTasks{Cred: &Cred{}},
		&LaunchTasksResponse{StepID: StepID{JobID: 9, StepID: 0, StepHetComp: NoVal}, ReturnCode: 0, NodeName: "n1", LocalPIDs: []uint32{100, 101}, TaskIDs: []uint32{0, 2}},
		&LaunchTasksResponse{StepID: StepID{JobID: 9, StepID: 0, StepHetComp: NoVal}, ReturnCode: ESlurmdExecveFailed},
		&TaskExit{ReturnCode: 0x300, TaskIDs: []uint32{0, 1}, StepID: StepID{JobID: 9, StepID: 0, StepHetComp: NoVal}},
		&TaskExit{},
		&ReattachTasks{StepID: StepID{JobID: 9, StepID: 0, StepHetComp: NoVal}, RespPorts: []uint16{1, 2}, IOPorts: []uint16{3}, Cred: sampleCred()},
		&ReattachTasks{Cred: &Cred{}},
	}
}

// launchWant is what decoding the encoding of b at version v gives.
func launchWant(b Body, v uint16) Body {
	switch m := b.(type) {
	case *LaunchTasks:
		c := *m
		if c.CredVersion == 0 {
			c.CredVersion = v
		}
		if c.SwitchPluginID == 0 {
			c.SwitchPluginID = SwitchPluginNone
		}
		c.Cred = credWant(c.Cred)
		return &c
	case *ReattachTasks:
		c := *m
		c.Cred = credWant(c.Cred)
		return &c
	}
	return b
}

// launchVersions lists the header versions a body has a layout for.
func launchVersions(b Body) []uint16 {
	switch b.(type) {
	case *LaunchTasks, *ReattachTasks:
		return []uint16{Version2205}
	}
	return []uint16{Version2011, Version2108, Version2205}
}

func TestLaunchBody_RoundTrip(t *testing.T) {
	for i, b := range launchSampleBodies() {
		for _, v := range launchVersions(b) {
			t.Run(fmt.Sprintf("%02d-%v-%04x", i, b.MsgType(), v), func(t *testing.T) {
				enc, err := EncodeBody(v, b)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := DecodeBody(v, b.MsgType(), enc)
				if err != nil {
					t.Fatal(err)
				}
				if want := launchWant(b, v); !reflect.DeepEqual(dec, want) {
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

// TestLaunchBody_WireLayout pins the layouts against the C packers.
func TestLaunchBody_WireLayout(t *testing.T) {
	tests := []struct {
		name string
		b    Body
		hex  string
	}{
		// step_id; rc; node_name; count_of_pids; arr32 local_pids; arr32 task_ids.
		{"launch response", &LaunchTasksResponse{StepID: StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}, NodeName: "j1", LocalPIDs: []uint32{0x10, 0x11}, TaskIDs: []uint32{0, 1}},
			"00000001 00000000 fffffffe 00000000 00000003 6a3100 00000002 00000002 00000010 00000011 00000002 00000000 00000001"},
		// rc; num_tasks; arr32 task_id_list; step_id.
		{"task exit", &TaskExit{ReturnCode: 0x300, TaskIDs: []uint32{0, 1}, StepID: StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}},
			"00000300 00000002 00000002 00000000 00000001 00000001 00000000 fffffffe"},
		{"task exit empty", &TaskExit{}, "00000000 00000000 00000000 00000000 00000000 00000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := mustHexT(strings.ReplaceAll(tc.hex, " ", ""))
			got, err := EncodeBody(Version2205, tc.b)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v\n got %x\nwant %x", err, got, want)
			}
		})
	}

	// The tail of a LaunchTasks after the credential, for a sample with
	// one node, ports, an IPv4 orig_addr and one job option.
	m := &LaunchTasks{HetJobNNodes: NoVal, HetJobNTasks: NoVal, NNodes: 1, Cred: &Cred{},
		TasksToLaunch: []uint16{1}, GlobalTaskIDs: [][]uint32{{5}}, RespPorts: []uint16{0x1234},
		OrigAddr: AddrFrom(netip.MustParseAddrPort("127.0.0.1:49250")), Argv: []string{"x"}, Flags: LaunchPTY,
		IOPorts: []uint16{0x2345, 0x3456}, JobOptions: []JobOption{{Type: 7, Opt: "o"}}, CompleteNodelist: "n1",
		OpenMode: OpenModeAppend, SelectPluginID: SelectPluginConsTres, X11Forwarding: X11Forwarding{X11TargetPort: 0x1770}}
	enc, err := EncodeBody(Version2205, m)
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := (&Cred{}).PackFields(Version2205)
	cred = append(cred, 0, 0, 0, 0) // empty signature
	i := bytes.Index(enc, cred)
	if i < 0 {
		t.Fatal("cred not found")
	}
	tail := strings.ReplaceAll("0001 00000001 00000005"+ // tasks_to_launch, global_task_ids
		" 0001 1234"+ // resp ports
		" 0002 0100007f 62c0"+ // orig_addr (x86 byte order quirk)
		" 00000000 00000000 00000000 00000000 0000 00000000 0000 00000000"+ // env, spank env, container, cwd, cpu bind, mem bind
		" 00000001 00000002 7800"+ // argv
		" 00000004 00000000 00000000 00000000"+ // flags, ofname, efname, ifname
		" 0002 2345 3456"+ // io ports
		" 00000000 00000000 00000000 0000"+ // profile, task prolog/epilog, slurmd_debug
		" 00000064"+ // switch/none
		" 0000000c 6a6f625f6f7074696f6e7300 00000001 00000007 00000002 6f00 00000000"+ // job_options
		" 00000000 00000003 6e3100"+ // alias_list, complete_nodelist
		" 01 00000000 00000000 00000000 00000000"+ // open_mode, acctg_freq, cpu_freq min/max/gov
		" 0000006d 00000000 00000000"+ // select/cons_tres, tres_bind, tres_freq
		" 0000 00000000 0000 00000000 00000000 1770", " ", "")
	if got := fmt.Sprintf("%x", enc[i+len(cred):]); got != tail {
		t.Fatalf("tail\n got %s\nwant %s", got, tail)
	}
}

func TestLaunchBody_Errors(t *testing.T) {
	samples := launchSampleBodies()
	full := samples[0].(*LaunchTasks)
	with := func(f func(m *LaunchTasks)) *LaunchTasks {
		c := *full
		f(&c)
		return &c
	}
	encErrs := []struct {
		name string
		v    uint16
		b    Body
		want error
	}{
		{"nil cred", Version2205, &LaunchTasks{}, ErrMalformed},
		{"cred_version 21.08", Version2205, &LaunchTasks{CredVersion: Version2108, Cred: &Cred{}}, ErrUnsupportedVersion},
		{"old header version", Version2108, full, ErrUnsupportedVersion},
		{"het tids without nnodes", Version2205, with(func(m *LaunchTasks) { m.HetJobNNodes = NoVal }), ErrMalformed},
		{"het tids count", Version2205, with(func(m *LaunchTasks) { m.HetJobNNodes = 2 }), ErrMalformed},
		{"het offsets without ntasks", Version2205, with(func(m *LaunchTasks) { m.HetJobNTasks = NoVal }), ErrMalformed},
		{"het offsets count", Version2205, with(func(m *LaunchTasks) { m.HetJobNTasks = 1 }), ErrMalformed},
		{"nnodes", Version2205, with(func(m *LaunchTasks) { m.NNodes = 3 }), ErrMalformed},
		{"nnodes NO_VAL", Version2205, with(func(m *LaunchTasks) { m.NNodes = NoVal }), ErrMalformed},
		{"global task ids", Version2205, with(func(m *LaunchTasks) { m.GlobalTaskIDs = [][]uint32{{0}, {1}} }), ErrMalformed},
		{"too many resp ports", Version2205, with(func(m *LaunchTasks) { m.RespPorts = make([]uint16, 0xfffe) }), ErrMalformed},
		{"too many io ports", Version2205, with(func(m *LaunchTasks) { m.IOPorts = make([]uint16, 0xffff) }), ErrMalformed},
		{"switch plugin", Version2205, with(func(m *LaunchTasks) { m.SwitchPluginID = 102 }), ErrMalformed},
		{"response arrays", Version2205, &LaunchTasksResponse{LocalPIDs: []uint32{1}}, ErrMalformed},
		{"reattach nil cred", Version2205, &ReattachTasks{}, ErrMalformed},
		{"reattach old version", Version2011, &ReattachTasks{Cred: &Cred{}}, ErrUnsupportedVersion},
		{"reattach ports", Version2205, &ReattachTasks{IOPorts: make([]uint16, 0xfffe), Cred: &Cred{}}, ErrMalformed},
	}
	for _, tc := range encErrs {
		t.Run("encode "+tc.name, func(t *testing.T) {
			if _, err := EncodeBody(tc.v, tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}

	good, err := EncodeBody(Version2205, full)
	if err != nil {
		t.Fatal(err)
	}
	// patch returns good with the bytes old (found once, after skip bytes)
	// replaced by new.
	patch := func(old, new string, skip int) []byte {
		o, n := mustHexT(strings.ReplaceAll(old, " ", "")), mustHexT(strings.ReplaceAll(new, " ", ""))
		i := bytes.Index(good[skip:], o)
		if i < 0 || len(o) != len(n) {
			t.Fatalf("patch %s not found", old)
		}
		b := append([]byte(nil), good...)
		copy(b[skip+i:], n)
		return b
	}
	credEnd := bytes.Index(good, []byte("MUNGE:AAA:\x00")) + len("MUNGE:AAA:\x00")
	decErrs := []struct {
		name string
		typ  MsgType
		v    uint16
		body []byte
		want error
	}{
		{"old header version", RequestLaunchTasks, Version2108, good, ErrUnsupportedVersion},
		{"reattach old header version", RequestReattachTasks, Version2011, good, ErrUnsupportedVersion},
		{"truncated", RequestLaunchTasks, Version2205, good[:len(good)-1], ErrShortBuffer},
		// het_job_nnodes 3 -> huge: no allocation, short buffer.
		{"huge het_job_nnodes", RequestLaunchTasks, Version2205, patch("00000001 00000008 00000003", "00000001 00000008 00ffffff", 0), ErrShortBuffer},
		{"nnodes NO_VAL", RequestLaunchTasks, Version2205, patch("00000002 0002 00000006 6370753a3200", "fffffffe 0002 00000006 6370753a3200", 0), ErrMalformed},
		{"huge nnodes", RequestLaunchTasks, Version2205, patch("00000002 0002 00000006 6370753a3200", "0fffffff 0002 00000006 6370753a3200", 0), ErrShortBuffer},
		{"tasks_to_launch mismatch", RequestLaunchTasks, Version2205, patch("0002 00000002 00000000 00000002", "0003 00000002 00000000 00000002", credEnd), ErrMalformed},
		{"resp ports NO_VAL16", RequestLaunchTasks, Version2205, patch("0002 03e8 03e9", "fffe 03e8 03e9", credEnd), ErrMalformed},
		{"io ports huge", RequestLaunchTasks, Version2205, patch("0001 07d0", "fff0 07d0", credEnd), ErrShortBuffer},
		{"switch plugin", RequestLaunchTasks, Version2205, patch("00000064 0000000c", "00000065 0000000c", credEnd), ErrMalformed},
		{"job options tag", RequestLaunchTasks, Version2205, patch("6a6f625f6f7074696f6e7300", "6a6f625f6f7074696f6e7400", credEnd), ErrMalformed},
		{"job options huge", RequestLaunchTasks, Version2205, patch("7300 00000002", "7300 20000000", credEnd), ErrShortBuffer},
		{"count_of_pids", ResponseLaunchTasks, Version2205, mustHexT("00000001 00000000 fffffffe 00000000 00000000 00000001 00000000 00000000"), ErrMalformed},
		{"local pids vs task ids", ResponseLaunchTasks, Version2205, mustHexT("00000001 00000000 fffffffe 00000000 00000000 00000001 00000001 00000005 00000000"), ErrMalformed},
		{"num_tasks", MessageTaskExit, Version2205, mustHexT("00000000 00000002 00000001 00000000 00000001 00000000 fffffffe"), ErrMalformed},
		{"task exit huge array", MessageTaskExit, Version2205, mustHexT("00000000 ffffffff ffffffff"), ErrTooLarge},
		{"reattach ports NO_VAL16", RequestReattachTasks, Version2205, mustHexT("00000001 00000000 fffffffe ffff"), ErrMalformed},
		{"reattach ports short", RequestReattachTasks, Version2205, mustHexT("00000001 00000000 fffffffe 0002 0001"), ErrShortBuffer},
	}
	for _, tc := range decErrs {
		t.Run("decode "+tc.name, func(t *testing.T) {
			if _, err := DecodeBody(tc.v, tc.typ, tc.body); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}

	// Every strict prefix of every sample fails cleanly.
	for _, s := range samples {
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

// TestLaunch_Registration: the types this file registers, and the ones it
// relies on from other files (REQUEST_TERMINATE_TASKS is a signal_tasks
// body; RESPONSE_REATTACH_TASKS is in msgs_step.go).
func TestLaunch_Registration(t *testing.T) {
	for _, typ := range []MsgType{RequestLaunchTasks, ResponseLaunchTasks, MessageTaskExit, RequestReattachTasks,
		ResponseReattachTasks, RequestTerminateTasks, RequestSignalTasks, RequestStepComplete} {
		if !HasBody(Version2205, typ) {
			t.Errorf("%v not registered", typ)
		}
	}
	b, err := DecodeBody(Version2205, RequestTerminateTasks, mustHexT("00000007 00000000 fffffffe 0000 0009"))
	if st, ok := b.(*SignalTasks); err != nil || !ok || *st != (SignalTasks{Type: RequestTerminateTasks, StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}, Signal: 9}) {
		t.Fatalf("terminate tasks: %v %+v", err, b)
	}
	// REQUEST_STEP_COMPLETE without accounting ends in u8 0.
	enc, err := EncodeBody(Version2205, &StepComplete{StepID: StepID{JobID: 7, StepID: 0, StepHetComp: NoVal}})
	if err != nil || len(enc) != 25 || enc[24] != 0 {
		t.Fatalf("step complete %x %v", enc, err)
	}
}

// launchFuzzSeeds are the bodies of the launch_tasks golden frames and of
// launchSampleBodies.
func launchFuzzSeeds(t testing.TB) []bodySeed {
	var out []bodySeed
	files, err := filepath.Glob("testdata/launch_tasks/*_v2600.bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		fr := readGolden(t, strings.TrimPrefix(filepath.ToSlash(f), "testdata/"))
		m, err := DecodeMessage(fr[4:])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bodySeed{m.Header.Version, uint16(m.Header.MsgType), m.Body})
	}
	for _, d := range releaseGoldenDirs {
		fs, _ := filepath.Glob(filepath.Join("testdata", d, "*launch_tasks*_v2*.bin"))
		rs, _ := filepath.Glob(filepath.Join("testdata", d, "*reattach*_v2*.bin"))
		te, _ := filepath.Glob(filepath.Join("testdata", d, "task_exit*_v2*.bin"))
		for _, f := range append(append(fs, rs...), te...) {
			fr, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m, err := DecodeMessage(fr[4:])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bodySeed{m.Header.Version, uint16(m.Header.MsgType), m.Body})
		}
	}
	for _, v := range Spoken() {
		for _, b := range launchSampleBodies() {
			enc, err := EncodeBody(v, forRelease(b, v))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, bodySeed{v, uint16(b.MsgType()), enc})
		}
	}
	return out
}

// FuzzDecodeLaunchTasks fuzzes the codecs of msgs_launch.go in every
// spoken release: decoding never panics, a decoded body re-encodes, and
// re-encoding is stable.
//
//	go test -run '^$' -fuzz FuzzDecodeLaunchTasks ./slurmd-go/pkg/slurmproto
func FuzzDecodeLaunchTasks(f *testing.F) {
	for _, s := range launchFuzzSeeds(f) {
		f.Add(s.version, s.typ, s.body)
	}
	types := []MsgType{RequestLaunchTasks, ResponseLaunchTasks, MessageTaskExit, RequestReattachTasks}
	spoken := Spoken()
	f.Fuzz(func(t *testing.T, version, typ uint16, b []byte) {
		mt := types[int(typ)%len(types)]
		v := spoken[int(version>>8)%len(spoken)]
		m, n, err := DecodeBodyPrefix(v, mt, b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		enc1, err := EncodeBody(v, m)
		if err != nil {
			t.Fatalf("decoded body does not encode: %v", err)
		}
		m2, err := DecodeBody(v, mt, enc1)
		if err != nil {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
		if enc2, err := EncodeBody(v, m2); err != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("encode not stable: %v", err)
		}
	})
}

// TestGoldenLaunch_ReattachTasksKey: from 23.11 sattach sends its own I/O
// key instead of a fake job credential; stock 24.11.5 and 26.05.5 send it
// empty. Key() is the string with its NUL, as io_init_msg_pack's packstr
// must send it back for sattach's comparison to pass.
func TestGoldenLaunch_ReattachTasksKey(t *testing.T) {
	for f, want := range map[string]string{
		"r2411/munge/reattach_tasks_v2a00.bin": "\x00",
		"r2605/munge/reattach_tasks_v2d00.bin": "\x00",
		"r2605/slurm/reattach_tasks_v2d00.bin": "\x00",
	} {
		_, _, b := decodeGoldenFrame(t, f)
		if key := string(b.(*ReattachTasks).Key()); key != want {
			t.Errorf("%s: key %q, want %q", f, key, want)
		}
	}
	_, _, b := decodeGoldenFrame(t, "launch_tasks/reattach_tasks_v2600.bin")
	if key := string(b.(*ReattachTasks).Key()); !strings.HasPrefix(key, "MUNGE:") {
		t.Errorf("22.05: key %q, want the fake credential's signature", key)
	}
}
