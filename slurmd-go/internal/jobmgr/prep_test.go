package jobmgr

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestCompressedCounts(t *testing.T) {
	cases := []struct {
		name string
		vals []uint16
		reps []uint32
		want string
	}{
		{"single node", []uint16{2}, []uint32{1}, "2"},
		{"repeated", []uint16{2, 1}, []uint32{3, 1}, "2(x3),1"},
		{"all repeated", []uint16{4}, []uint32{16}, "4(x16)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CompressedCounts(c.vals, c.reps); got != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
		})
	}
}

func testManager(t *testing.T, extra string) *Manager {
	t.Helper()
	return testManagerAs(t, extra, slurmconf.V2205)
}

func names(env []string) []string {
	var out []string
	for _, kv := range env {
		out = append(out, kv[:strings.IndexByte(kv, '=')])
	}
	sort.Strings(out)
	return out
}

func TestScriptEnv_Epilog(t *testing.T) {
	m := testManager(t, "")
	env := m.scriptEnv(scriptJob{
		JobID: 7, UID: 1000, GID: 1000, UserName: "alice", WorkDir: "/home/alice",
		Nodes: "n[1-3]", Partition: "debug", SpankJobEnv: []string{"SPANK_X=1", "LD_PRELOAD=/evil.so"},
		Epilog: true, ExitCode: 3 << 8,
		Cred: &slurmproto.Cred{JobNHosts: 3, JobNTasks: 3, CPUArray: []uint16{1}, CPUArrayReps: []uint32{3}, JobRestartCnt: 0},
	})
	want := []string{"SLURMD_NODENAME", "SLURM_CLUSTER_NAME", "SLURM_CONF", "SLURM_JOBID", "SLURM_JOB_CPUS_PER_NODE",
		"SLURM_JOB_DERIVED_EC", "SLURM_JOB_EXIT_CODE", "SLURM_JOB_EXIT_CODE2", "SLURM_JOB_GID", "SLURM_JOB_ID",
		"SLURM_JOB_NTASKS", "SLURM_JOB_NUM_NODES", "SLURM_JOB_PARTITION", "SLURM_JOB_RESTART_COUNT", "SLURM_JOB_UID",
		"SLURM_JOB_USER", "SLURM_JOB_WORK_DIR", "SLURM_NODELIST", "SLURM_SCRIPT_CONTEXT", "SLURM_UID", "SPANK_LD_PRELOAD", "SPANK_X"}
	if got := names(env); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("names\n got %v\nwant %v", got, want)
	}
	for _, kv := range []string{"SLURM_JOB_EXIT_CODE=768", "SLURM_JOB_EXIT_CODE2=3:0", "SLURM_SCRIPT_CONTEXT=epilog_slurmd",
		"SLURMD_NODENAME=n2", "SLURM_JOB_CPUS_PER_NODE=1(x3)", "SLURM_JOB_USER=alice"} {
		if !contains2(env, kv) {
			t.Errorf("missing %s in %v", kv, env)
		}
	}
}

func contains2(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

func TestRunScript_Status(t *testing.T) {
	m := testManager(t, "")
	dir := t.TempDir()
	script := filepath.Join(dir, "prolog")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$SLURM_SCRIPT_CONTEXT\" = prolog_slurmd ] || exit 9\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := m.runScript(context.Background(), "prolog", script, m.scriptEnv(scriptJob{JobID: 1}))
	if exitOf(st) != 3 || sigOf(st) != 0 {
		t.Fatalf("status %#x, want exit 3", st)
	}
	if st := m.runScript(context.Background(), "prolog", "", nil); st != 0 {
		t.Fatalf("no script: status %d", st)
	}
}

// TestRunScripts_Releases: 22.05 runs the last Prolog line; 24.11 runs
// every line in order, each a path or a glob, until one fails.
func TestRunScripts_Releases(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "ran")
	script := func(name string, rc int) string {
		p := filepath.Join(dir, name)
		body := "#!/bin/sh\necho " + name + " >>" + log + "\nexit " + string(rune('0'+rc)) + "\n"
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := script("a", 0), script("b", 0)
	script("g1", 0)
	script("g2", 3)
	c := script("c", 0)
	conf := "Prolog=" + a + "\nProlog=" + b + "\nProlog=" + filepath.Join(dir, "g*") + "\nProlog=" + c + "\n"
	for _, tc := range []struct {
		version uint16
		ran     string
		status  uint32
	}{
		{slurmconf.V2205, "c\n", 0},                 // the last line
		{slurmconf.V2411, "a\nb\ng1\ng2\n", 3 << 8}, // in turn, the glob sorted, stopped at g2
	} {
		os.Remove(log)
		m := testManagerAs(t, conf, tc.version)
		if st := m.runScripts(context.Background(), "prolog", nil); st != tc.status {
			t.Errorf("%04x: status %d, want %d", tc.version, st, tc.status)
		}
		got, _ := os.ReadFile(log)
		if string(got) != tc.ran {
			t.Errorf("%04x: ran %q, want %q", tc.version, got, tc.ran)
		}
	}
}

func testManagerAs(t *testing.T, extra string, version uint16) *Manager {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "slurm.conf")
	body := "ClusterName=c1\nSlurmctldHost=ctl\nSlurmUser=root\nNodeName=n[1-3] CPUs=1\n" + extra
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	conf, err := slurmconf.Load(p, slurmconf.Options{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Resolve(config.Flags{ConfFile: p, NodeName: "n2"}, conf)
	if err != nil {
		t.Fatal(err)
	}
	return New(func() *config.Config { return cfg }, nil, nil, func() int { return 1 }, "/nonexistent", nil, hclog.NewNullLogger())
}

func TestRequeueFlags(t *testing.T) {
	cases := []struct {
		version uint16
		rc      uint32
		sched   string
		want    uint32
	}{
		{slurmproto.Version2205, slurmproto.ESlurmdSetupEnvironmentError, "", jobRequeueHold | jobLaunchFailed},
		{slurmproto.Version2205, slurmproto.ESlurmdPrologFailed, "bf_interval=30,NOHOLD_ON_PROLOG_FAIL", 0},
		{slurmproto.Version2411, slurmproto.ESlurmdPrologFailed, "", jobLaunchFailed},
		{slurmproto.Version2411, slurmproto.ESlurmdSetupEnvironmentError, "nohold_on_prolog_fail", jobLaunchFailed},
		{slurmproto.Version2605, slurmproto.ESlurmdPrologFailed, "", jobLaunchFailed},
		{slurmproto.Version2605, slurmproto.ESlurmdSetupEnvironmentError, "", jobLaunchFailed | jobGetenvFailed},
	}
	for _, tc := range cases {
		if got := requeueFlags(tc.version, tc.rc, tc.sched); got != tc.want {
			t.Errorf("requeueFlags(0x%04x, %d, %q) = %#x, want %#x", tc.version, tc.rc, tc.sched, got, tc.want)
		}
	}
}
