//go:build linux

package stepd

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/envarray"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestStepTaskEnv_Exact: the whole task environment for a full
// configuration, entry by entry and in order: env_array_copy of srun's
// env (entries without '=' dropped, a duplicate name collapsed into its
// first position with its last value), SLURM_CONF overwritten in place,
// SLURM_CONF_SERVER removed, SLURM_STEP_ID overwritten in place, the rest
// appended in setup_env's order, then SLURM_JOB_GID, SLURMD_NODENAME and
// the TRES variables. The input is not changed.
func TestStepTaskEnv_Exact(t *testing.T) {
	in := Env{
		"PATH=/usr/bin:/bin", "SLURM_CONF_SERVER=ctl:6817", "SLURM_STEP_ID=99", "SLURM_NTASKS=2",
		"SLURM_CONF=/old.conf", "NOEQ", "DUP=1", "DUP=2", "SLURM_CONF_SERVER=again",
	}
	orig := slices.Clone(in)
	got := StepTaskEnv(in, StepEnvConfig{
		ConfFile: "/etc/slurm/slurm.conf", CPUsOnNode: 4, JobID: 1234, StepID: 7, TaskPID: 4321,
		NodeID: 1, ProcID: 3, LocalID: 1, GTIDs: "2,3", CommPort: 44295, LaunchHost: "10.0.0.5",
		UID: 1002, GID: 1003, UserName: "tieegold", WorkingCluster: "goldlt:localhost:17917:9728:109",
		NodeName: "j2", TresBind: "gres/gpu:closest", TresFreq: "gpu:high",
	})
	want := []string{
		"PATH=/usr/bin:/bin",
		"SLURM_STEP_ID=7",
		"SLURM_NTASKS=2",
		"SLURM_CONF=/etc/slurm/slurm.conf",
		"DUP=2",
		"SLURM_CPUS_ON_NODE=4",
		"SLURM_JOB_ID=1234",
		"SLURM_JOBID=1234",
		"SLURM_TASK_PID=4321",
		"SLURM_NODEID=1",
		"SLURM_PROCID=3",
		"SLURM_LOCALID=1",
		"SLURM_STEPID=7",
		"SLURM_SRUN_COMM_PORT=44295",
		"SLURM_LAUNCH_NODE_IPADDR=10.0.0.5",
		"SLURM_GTIDS=2,3",
		"SLURM_JOB_UID=1002",
		"SLURM_JOB_USER=tieegold",
		"SLURM_WORKING_CLUSTER=goldlt:localhost:17917:9728:109",
		"SLURM_JOB_GID=1003",
		"SLURMD_NODENAME=j2",
		"SLURMD_TRES_BIND=gres/gpu:closest",
		"SLURMD_TRES_FREQ=gpu:high",
	}
	if !slices.Equal(got, want) {
		t.Errorf("env\n got %q\nwant %q", got, want)
	}
	if !slices.Equal(in, orig) {
		t.Errorf("input changed: %q", in)
	}
	// The result does not share the input's backing array.
	got[0] = "X=1"
	if in[0] != orig[0] {
		t.Error("result aliases the input")
	}
}

// TestStepTaskEnv_Minimal: what is left out when the config has no
// value for it (CPUs, task pid, srun port and host, user, TRES), "(null)"
// for a missing SLURM_CONF as C's printf("%s", NULL) and "" for the wire's
// empty string; an existing SLURM_CPUS_ON_NODE is kept, not removed.
func TestStepTaskEnv_Minimal(t *testing.T) {
	got := StepTaskEnv(Env{"SLURM_CPUS_ON_NODE=9"}, StepEnvConfig{JobID: 5, StepID: 0, GTIDs: "0", NodeName: "n1"})
	want := []string{
		"SLURM_CPUS_ON_NODE=9", "SLURM_CONF=(null)", "SLURM_JOB_ID=5", "SLURM_JOBID=5",
		"SLURM_NODEID=0", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_STEP_ID=0", "SLURM_STEPID=0",
		"SLURM_GTIDS=0", "SLURM_JOB_GID=0", "SLURMD_NODENAME=n1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("env\n got %q\nwant %q", got, want)
	}
	got = StepTaskEnv(nil, StepEnvConfig{ConfFile: slurmproto.EmptyString, JobID: 5, GTIDs: "0"})
	if v, _ := Env(got).Get("SLURM_CONF"); v != "" || !slices.Contains(got, "SLURM_CONF=") {
		t.Errorf("SLURM_CONF for the wire's empty string: %q", got)
	}
	// A value setenvf refuses (MAX_ENV_STRLEN) is left out, the rest set.
	got = StepTaskEnv(nil, StepEnvConfig{JobID: 5, GTIDs: "0", UserName: strings.Repeat("u", envarray.MaxStrlen)})
	if _, ok := Env(got).Get("SLURM_JOB_USER"); ok {
		t.Error("over-long SLURM_JOB_USER was set")
	}
	if v, ok := Env(got).Get("SLURM_JOB_UID"); !ok || v != "0" {
		t.Errorf("SLURM_JOB_UID = %q %v", v, ok)
	}
}

// TestStepTaskEnv_Int32 prints the ids as C's %d of an int.
func TestStepTaskEnv_Int32(t *testing.T) {
	got := Env(StepTaskEnv(nil, StepEnvConfig{JobID: 67108863, StepID: 123456, NodeID: 511, ProcID: 70000, LocalID: 255, GTIDs: "70000"}))
	for k, v := range map[string]string{
		"SLURM_JOB_ID": "67108863", "SLURM_STEP_ID": "123456", "SLURM_STEPID": "123456",
		"SLURM_NODEID": "511", "SLURM_PROCID": "70000", "SLURM_LOCALID": "255",
	} {
		if g, ok := got.Get(k); !ok || g != v {
			t.Errorf("%s = %q %v, want %q", k, g, ok, v)
		}
	}
}

// TestStepTaskEnv_SpecialStepID: setup_env sets SLURM_STEP_ID/STEPID only
// "if (env->stepid >= 0)" (env.c); a special step id (the interactive
// step, 0xfffffffa) is negative as an int, so the value srun put there
// ("%u", env_array_for_step) reaches the task unchanged.
func TestStepTaskEnv_SpecialStepID(t *testing.T) {
	got := Env(StepTaskEnv(Env{"SLURM_STEP_ID=4294967290", "SLURM_STEPID=4294967290"},
		StepEnvConfig{JobID: 9, StepID: slurmproto.StepIDInteractive, GTIDs: "0"}))
	v1, _ := got.Get("SLURM_STEP_ID")
	v2, _ := got.Get("SLURM_STEPID")
	if v1 != "4294967290" || v2 != "4294967290" {
		t.Errorf("SLURM_STEP_ID=%q SLURM_STEPID=%q, want srun's 4294967290", v1, v2)
	}
}

// mkFile creates a file with mode (a shell script body).
func mkFile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
}

// TestResolvePath is _build_path: absolute and ./ names as given (relative
// to cwd), bare names searched in the task's PATH (empty entries skipped,
// relative entries taken from the task's cwd, directories skipped, first
// match wins), then the working directory; not found stays as is, for
// execve to fail on.
func TestResolvePath(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "work")
	bin1, bin2 := filepath.Join(root, "bin1"), filepath.Join(root, "bin2")
	mkFile(t, filepath.Join(bin1, "prog"), 0o755)
	mkFile(t, filepath.Join(bin2, "prog"), 0o755)
	mkFile(t, filepath.Join(bin2, "only2"), 0o755)
	mkFile(t, filepath.Join(bin2, "isdir"), 0o755)
	if err := os.MkdirAll(filepath.Join(bin1, "isdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	mkFile(t, filepath.Join(cwd, "rel", "relprog"), 0o755)
	mkFile(t, filepath.Join(cwd, "here"), 0o755)

	env := func(path string) []string { return []string{"HOME=/h", "PATH=" + path, "X=1"} }
	tests := []struct {
		name, cmd string
		env       []string
		want      string
	}{
		{"first PATH entry wins", "prog", env(bin1 + ":" + bin2), filepath.Join(bin1, "prog")},
		{"order matters", "prog", env(bin2 + ":" + bin1), filepath.Join(bin2, "prog")},
		{"later entry", "only2", env(bin1 + ":" + bin2), filepath.Join(bin2, "only2")},
		{"empty entries skipped", "only2", env("::" + bin2 + ":"), filepath.Join(bin2, "only2")},
		{"directory skipped", "isdir", env(bin1 + ":" + bin2), filepath.Join(bin2, "isdir")},
		{"relative PATH dir from cwd", "relprog", env("/nonexistent:rel"), filepath.Join(cwd, "rel", "relprog")},
		{"cwd after PATH", "here", env(bin1), filepath.Join(cwd, "here")},
		{"no PATH: cwd", "here", []string{"HOME=/h"}, filepath.Join(cwd, "here")},
		{"not found", "nosuch", env(bin1 + ":" + bin2), "nosuch"},
		{"no PATH, not found", "nosuch", nil, "nosuch"},
		{"absolute as given", "/no/such/prog", env(bin1), "/no/such/prog"},
		{"absolute not searched", filepath.Join(bin2, "prog"), env(bin1), filepath.Join(bin2, "prog")},
		{"dot slash from cwd", "./here", env(bin1), filepath.Join(cwd, "here")},
		{"dot slash not searched", "./prog", env(bin1), filepath.Join(cwd, "prog")},
		{"empty", "", env(bin1), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolvePath(tc.cmd, tc.env, cwd); got != tc.want {
				t.Errorf("resolvePath(%q) = %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}
}

// TestRankMatches: multi_prog.c _in_range: "*" alone, or a comma list of
// ranks and lo-hi ranges; malformed parts are ignored.
func TestRankMatches(t *testing.T) {
	tests := []struct {
		spec string
		yes  []uint32
		no   []uint32
	}{
		{"*", []uint32{0, 1, 4294967295}, nil},
		{"7", []uint32{7}, []uint32{0, 6, 8, 70}},
		{"0-3,5", []uint32{0, 1, 2, 3, 5}, []uint32{4, 6}},
		{"5,0-3", []uint32{0, 3, 5}, []uint32{4}},
		{"2-2", []uint32{2}, []uint32{1, 3}},
		{"5-3", nil, []uint32{3, 4, 5}},
		{"a,1", []uint32{1}, []uint32{0}},
		{"1-x,2", []uint32{2}, []uint32{1}},
		{"*,1", []uint32{1}, []uint32{0, 2}},
		{"", nil, []uint32{0}},
		{"10-12,20-21", []uint32{10, 11, 12, 20, 21}, []uint32{9, 13, 19, 22}},
	}
	for _, tc := range tests {
		for _, r := range tc.yes {
			if !rankMatches(tc.spec, r) {
				t.Errorf("rankMatches(%q, %d) = false", tc.spec, r)
			}
		}
		for _, r := range tc.no {
			if rankMatches(tc.spec, r) {
				t.Errorf("rankMatches(%q, %d) = true", tc.spec, r)
			}
		}
	}
}

const multiProgConf = `# a comment
   # an indented comment

0      echo task%t zero
1-2,4  /bin/prog  -n %t	arg%tx
*      default %t
`

var multiProgCases = []struct {
	gtid uint32
	want []string
}{
	{0, []string{"echo", "task0", "zero"}},
	{1, []string{"/bin/prog", "-n", "1", "arg1x"}},
	{2, []string{"/bin/prog", "-n", "2", "arg2x"}},
	{3, []string{"default", "3"}},
	{4, []string{"/bin/prog", "-n", "4", "arg4x"}},
	{99, []string{"default", "99"}},
}

// TestMultiProgArgv: what srun sends with --multi-prog (launch_slurm.c
// _load_multi): argv[0] the file name, argv[1] the file's contents, then
// srun's remaining arguments, which slurmstepd appends to every task's
// line (multi_prog_get_argv: global_argv[2..]). The first matching line
// wins, comments and blank lines are skipped, %t is the task id; no
// matching line gives no program.
func TestMultiProgArgv(t *testing.T) {
	for _, tc := range multiProgCases {
		if got := multiProgArgv([]string{"multi.conf", multiProgConf}, tc.gtid); !slices.Equal(got, tc.want) {
			t.Errorf("task %d: %q, want %q", tc.gtid, got, tc.want)
		}
	}
	got := multiProgArgv([]string{"multi.conf", multiProgConf, "extra"}, 2)
	if want := []string{"/bin/prog", "-n", "2", "arg2x", "extra"}; !slices.Equal(got, want) {
		t.Errorf("task 2 with srun arguments: %q, want %q", got, want)
	}
	for _, argv := range [][]string{{"x", "0 a\n1 b\n"}, {"x"}, nil} {
		if got := multiProgArgv(argv, 5); got != nil {
			t.Errorf("multiProgArgv(%q, 5) = %q, want no program", argv, got)
		}
	}
	quoted := "0-1,4-5 sh -c 'echo off=%o id=%t' it\\'s\n"
	if got, want := multiProgArgv([]string{"m", quoted}, 5), []string{"sh", "-c", "echo off=%o id=%t", "it's"}; !slices.Equal(got, want) {
		t.Errorf("quoted: %q, want %q", got, want)
	}
	if got, want := multiProgArgv([]string{"m", "0-1,4-5 echo %o/%t\n"}, 5), []string{"echo", "3/5"}; !slices.Equal(got, want) {
		t.Errorf("offset: %q, want %q", got, want)
	}
}

// stepWith returns a Step holding tasks with the given raw statuses.
func stepWith(statuses ...int32) *Step {
	s := &Step{}
	for i, st := range statuses {
		s.tasks = append(s.tasks, &stepTask{ltid: uint32(i), gtid: uint32(i), exited: true, status: st})
	}
	return s
}

// TestStepRC is mgr.c _get_exit_code: the first signaled task's status
// wins; otherwise the last task's (stock takes MAX against
// step_complete.step_rc, which is 0); tasks killed by a command are
// ignored unless all were, then task 0's status; an OOM in the cgroup
// makes it SIG_OOM.
func TestStepRC(t *testing.T) {
	const oom = int32(slurmproto.SigOOM)
	sigkill, sigterm := int32(syscall.SIGKILL), int32(syscall.SIGTERM)
	tests := []struct {
		name   string
		s      *Step
		killed []int // tasks killed by command
		oom    bool
		want   uint32
	}{
		{"all zero", stepWith(0, 0), nil, false, 0},
		{"one task", stepWith(0x300), nil, false, 0x300},
		{"last exit status, not the max", stepWith(0x300, 0x100), nil, false, 0x100},
		{"last non-zero", stepWith(0x100, 0x300), nil, false, 0x300},
		{"zero after non-zero", stepWith(0x300, 0), nil, false, 0},
		{"signal wins", stepWith(0x100, sigkill, 0x300), nil, false, uint32(sigkill)},
		{"first signal wins", stepWith(sigterm, sigkill), nil, false, uint32(sigterm)},
		{"signal with core dump", stepWith(0x100, 0x80|11), nil, false, 0x80 | 11},
		{"OOM status", stepWith(0x100, oom, 0x200), nil, false, uint32(oom)},
		{"killed by command ignored", stepWith(sigkill, 0x200), []int{0}, false, 0x200},
		{"killed signal ignored, exit kept", stepWith(0x200, sigterm), []int{1}, false, 0x200},
		{"all killed by command: task 0", stepWith(sigterm, sigkill), []int{0, 1}, false, uint32(sigterm)},
		{"cgroup OOM overrides", stepWith(0, sigkill), nil, true, uint32(oom)},
		{"no tasks", stepWith(), nil, false, slurmproto.NoVal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, i := range tc.killed {
				tc.s.tasks[i].killedByCmd = true
			}
			tc.s.oom = tc.oom
			if got := tc.s.stepRC(); got != tc.want {
				t.Errorf("stepRC = %#x, want %#x", got, tc.want)
			}
		})
	}
}

// TestSrunHost: srun's address with the port list entry of this node
// (nodeid % count); none without an address or with port 0.
func TestSrunHost(t *testing.T) {
	s := &Step{launch: &slurmproto.LaunchTasks{OrigAddr: slurmproto.AddrFrom(netip.MustParseAddrPort("10.1.2.3:999"))}, nodeID: 3}
	if h, ok := s.srunHost([]uint16{100, 200}); !ok || h != "10.1.2.3:200" {
		t.Errorf("srunHost = %q %v", h, ok)
	}
	if h, ok := s.srunHost([]uint16{100}); !ok || h != "10.1.2.3:100" {
		t.Errorf("srunHost = %q %v", h, ok)
	}
	for _, ports := range [][]uint16{nil, {100, 0}} {
		if h, ok := s.srunHost(ports); ok {
			t.Errorf("srunHost(%v) = %q", ports, h)
		}
	}
	s.launch.OrigAddr = slurmproto.Addr{}
	if h, ok := s.srunHost([]uint16{100}); ok {
		t.Errorf("no address: %q", h)
	}
}
