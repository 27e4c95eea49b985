package stepd

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func specStub() *stepapi.StartSpec { return &stepapi.StartSpec{Hostname: "vm", NodeName: "n1"} }

func TestCompressedStrings(t *testing.T) {
	if got := compressedToStr([]uint16{2, 1}, []uint32{3, 1}); got != "2(x3),1" {
		t.Errorf("compressed %q", got)
	}
	if got := uint16ArrayToStr([]uint16{1, 2, 1, 1, 1, 3, 2}); got != "1,2,1(x3),3,2" {
		t.Errorf("uint16 array %q", got)
	}
}

// stockJob7 is the environment the stock 22.05.8 slurmstepd gave a
// one-node batch job (captured on the local test cluster: sbatch of a
// script running env, as root, DefMemPerCPU=100, select/cons_tres). The
// variables from the submitting shell (HOME, PATH, ...) and the pid are
// left out; everything else must match name and value.
var stockJob7 = `ENVIRONMENT=BATCH
HOSTNAME=bmyyrn1
SLURMD_NODENAME=bmyyrn1
SLURM_CLUSTER_NAME=tif3f52cea
SLURM_CONF=/tmp/ti-42451093/slurm.conf
SLURM_CPUS_ON_NODE=1
SLURM_GTIDS=0
SLURM_JOBID=7
SLURM_JOB_CPUS_PER_NODE=1
SLURM_JOB_GID=0
SLURM_JOB_ID=7
SLURM_JOB_NAME=envjob.sh
SLURM_JOB_NODELIST=bmyyrn1
SLURM_JOB_NUM_NODES=1
SLURM_JOB_PARTITION=debug
SLURM_JOB_UID=0
SLURM_JOB_USER=root
SLURM_LOCALID=0
SLURM_MEM_PER_CPU=100
SLURM_NNODES=1
SLURM_NODEID=0
SLURM_NODELIST=bmyyrn1
SLURM_NODE_ALIASES=(null)
SLURM_PRIO_PROCESS=0
SLURM_PROCID=0
SLURM_SUBMIT_DIR=/tmp/ti-42451093/work/root
SLURM_SUBMIT_HOST=vm
SLURM_TASKS_PER_NODE=1
SLURM_TASK_PID=27026
SLURM_TOPOLOGY_ADDR=bmyyrn1
SLURM_TOPOLOGY_ADDR_PATTERN=node
SLURM_WORKING_CLUSTER=tif3f52cea:127.0.0.1:21353:9728:109`

func job7() *slurmproto.BatchJobLaunch {
	return &slurmproto.BatchJobLaunch{
		JobID: 7, HetJobID: slurmproto.NoVal, Partition: "debug",
		PnMinMemory: 100 | slurmproto.MemPerCPU, ArrayTaskID: slurmproto.NoVal,
		CPUsPerTask: slurmproto.NoVal16, CPUsPerNode: []uint16{1}, CPUCountReps: []uint32{1},
		Nodes: "bmyyrn1",
		Environment: []string{
			"HOME=/root", "PATH=/usr/bin:/bin", "SLURM_PRIO_PROCESS=0", "SLURM_UMASK=0022",
			"SLURM_JOB_NAME=envjob.sh", "SLURM_SUBMIT_DIR=/tmp/ti-42451093/work/root",
			"SLURM_SUBMIT_HOST=vm", "SLURM_RLIMIT_CPU=18446744073709551615",
		},
	}
}

func taskEnvForJob7(m *slurmproto.BatchJobLaunch) Env {
	jobEnv := BatchJobEnv(m, BatchEnvConfig{ClusterName: "tif3f52cea", NodeName: "bmyyrn1",
		TopologyAddr: "bmyyrn1", TopologyPattern: "node"})
	jobEnv.Unset("SLURM_UMASK") // set_umask, before the fork
	return BatchTaskEnv(jobEnv, TaskEnvConfig{
		ConfFile: "/tmp/ti-42451093/slurm.conf", CPUsOnNode: 1, JobID: 7, TaskPID: 27026,
		GTIDs: "0", UID: 0, GID: 0, UserName: "root",
		Overcommit: m.Overcommit != 0, RestartCount: m.RestartCnt,
		WorkingCluster: "tif3f52cea:127.0.0.1:21353:9728:109", NodeName: "bmyyrn1",
	})
}

func TestBatchEnv_MatchesStock(t *testing.T) {
	env := taskEnvForJob7(job7())
	env.Unset("SLURM_RLIMIT_CPU") // set_user_limits, in the task
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "PATH" {
			continue
		}
		got[k] = v
	}
	want := map[string]string{}
	for _, l := range strings.Split(stockJob7, "\n") {
		k, v, _ := strings.Cut(l, "=")
		want[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, stock %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("extra %s=%q (stock has none)", k, v)
		}
	}
}

// TestBatchEnv_Variants covers the conditional variables of
// env_array_for_batch_job and setup_env.
func TestBatchEnv_Variants(t *testing.T) {
	get := func(e Env, k string) string {
		v, ok := e.Get(k)
		if !ok {
			return "<unset>"
		}
		return v
	}
	for _, tc := range []struct {
		name string
		edit func(m *slurmproto.BatchJobLaunch)
		want map[string]string
	}{
		{"multi-node cpus", func(m *slurmproto.BatchJobLaunch) {
			m.Nodes, m.CPUsPerNode, m.CPUCountReps = "n[1-4]", []uint16{2, 1}, []uint32{3, 1}
		}, map[string]string{"SLURM_JOB_CPUS_PER_NODE": "2(x3),1", "SLURM_TASKS_PER_NODE": "2(x3),1",
			"SLURM_NNODES": "4", "SLURM_JOB_NUM_NODES": "4", "SLURM_NTASKS": "<unset>", "SLURM_CPUS_ON_NODE": "1"}},
		{"ntasks given", func(m *slurmproto.BatchJobLaunch) {
			m.Nodes, m.CPUsPerNode, m.CPUCountReps, m.NTasks = "n[1-2]", []uint16{4}, []uint32{2}, 3
		}, map[string]string{"SLURM_NTASKS": "3", "SLURM_NPROCS": "3", "SLURM_TASKS_PER_NODE": "2,1"}},
		{"ntasks already in env", func(m *slurmproto.BatchJobLaunch) {
			m.NTasks = 5
			m.Environment = append(m.Environment, "SLURM_NTASKS=9")
		}, map[string]string{"SLURM_NTASKS": "9", "SLURM_NPROCS": "5", "SLURM_TASKS_PER_NODE": "5"}},
		{"cpus per task only if present", func(m *slurmproto.BatchJobLaunch) {
			m.CPUsPerTask, m.CPUsPerNode = 2, []uint16{4}
			m.Environment = append(m.Environment, "SLURM_CPUS_PER_TASK=7")
		}, map[string]string{"SLURM_CPUS_PER_TASK": "2", "SLURM_TASKS_PER_NODE": "2"}},
		{"array", func(m *slurmproto.BatchJobLaunch) { m.ArrayJobID, m.ArrayTaskID = 5, 3 },
			map[string]string{"SLURM_ARRAY_JOB_ID": "5", "SLURM_ARRAY_TASK_ID": "3"}},
		{"mem per node, account qos resv, aliases", func(m *slurmproto.BatchJobLaunch) {
			m.PnMinMemory, m.Account, m.QOS, m.ResvName, m.AliasList = 2048, "acct", "normal", slurmproto.EmptyString, "n1:10.0.0.1:n1"
		}, map[string]string{"SLURM_MEM_PER_NODE": "2048", "SLURM_MEM_PER_CPU": "<unset>", "SLURM_JOB_ACCOUNT": "acct",
			"SLURM_JOB_QOS": "normal", "SLURM_JOB_RESERVATION": "", "SLURM_NODE_ALIASES": "n1:10.0.0.1:n1"}},
		{"no partition", func(m *slurmproto.BatchJobLaunch) { m.Partition = "" },
			map[string]string{"SLURM_JOB_PARTITION": "(null)"}},
		{"overcommit and restart", func(m *slurmproto.BatchJobLaunch) { m.Overcommit, m.RestartCnt = 1, 2 },
			map[string]string{"SLURM_OVERCOMMIT": "1", "SLURM_RESTART_COUNT": "2"}},
		{"arbitrary layout", func(m *slurmproto.BatchJobLaunch) {
			m.Nodes, m.CPUsPerNode, m.CPUCountReps, m.NTasks = "n[1-2]", []uint16{1}, []uint32{2}, 3
			m.Environment = append(m.Environment, "SLURM_ARBITRARY_NODELIST=n2,n1,n1")
		}, map[string]string{"SLURM_TASKS_PER_NODE": "2,1"}},
		{"bad arbitrary list stops early", func(m *slurmproto.BatchJobLaunch) {
			m.NTasks = 2
			m.Environment = append(m.Environment, "SLURM_ARBITRARY_NODELIST=n1")
		}, map[string]string{"SLURM_TASKS_PER_NODE": "<unset>", "SLURM_MEM_PER_CPU": "<unset>"}},
		{"conf server removed, SLURM_CONF forced", func(m *slurmproto.BatchJobLaunch) {
			m.Environment = append(m.Environment, "SLURM_CONF_SERVER=x:6817", "SLURM_CONF=/other")
		}, map[string]string{"SLURM_CONF_SERVER": "<unset>", "SLURM_CONF": "/tmp/ti-42451093/slurm.conf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := job7()
			tc.edit(m)
			env := taskEnvForJob7(m)
			for k, v := range tc.want {
				if got := get(env, k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestTaskLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  layoutRequest
		want string
	}{
		{"block", layoutRequest{NodeList: "n[1-3]", NumHosts: 3, NumTasks: 5, CPUsPerNode: []uint16{2, 1}, CPUCountReps: []uint32{2, 1}, CPUsPerTask: 1}, "2(x2),1"},
		{"block evens out", layoutRequest{NodeList: "n[1-2]", NumHosts: 2, NumTasks: 4, CPUsPerNode: []uint16{4}, CPUCountReps: []uint32{2}, CPUsPerTask: 1}, "2(x2)"},
		{"pack nodes", layoutRequest{NodeList: "n[1-2]", NumHosts: 2, NumTasks: 4, CPUsPerNode: []uint16{4}, CPUCountReps: []uint32{2}, CPUsPerTask: 1, PackNodes: true}, "3,1"},
		{"oversubscribed", layoutRequest{NodeList: "n[1-2]", NumHosts: 2, NumTasks: 5, CPUsPerNode: []uint16{1}, CPUCountReps: []uint32{2}, CPUsPerTask: 1}, "3,2"},
		{"cpus per task", layoutRequest{NodeList: "n1", NumHosts: 1, NumTasks: 2, CPUsPerNode: []uint16{4}, CPUCountReps: []uint32{1}, CPUsPerTask: 2}, "2"},
		{"zero tasks", layoutRequest{NodeList: "n[1-2]", NumHosts: 2, NumTasks: 0, CPUsPerNode: []uint16{1}, CPUCountReps: []uint32{2}, CPUsPerTask: 1}, "0(x2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tasks, err := taskLayout(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := uint16ArrayToStr(tasks); got != tc.want {
				t.Errorf("layout %s, want %s", got, tc.want)
			}
		})
	}
}

// The release's batch environment: 24.11 dropped SLURM_NODE_ALIASES and
// added the job's times, licenses and oom_kill_step; 26.05 adds the SLUID
// (measured with the stock 24.11.5 and 26.05.5 step managers, see
// integration/release_facts_test.go).
func TestBatchEnv_Releases(t *testing.T) {
	start := time.Unix(1764000000, 0)
	cred := &slurmproto.Cred{JobStartTime: start, JobEndTime: start.Add(time.Hour), JobLicenses: "lic:1",
		StepID: slurmproto.StepID{SLUID: 0x1234}}
	for _, tc := range []struct {
		v          uint16
		aliases    bool
		extra      []string
		sluid, oom bool
	}{
		{slurmproto.Version2205, true, nil, false, false},
		{slurmproto.Version2411, false, []string{"SLURM_JOB_START_TIME=1764000000", "SLURM_JOB_END_TIME=1764003600", "SLURM_JOB_LICENSES=lic:1", "SLURM_OOM_KILL_STEP=1"}, false, true},
		{slurmproto.Version2605, false, []string{"SLURM_JOB_START_TIME=1764000000", "SLURM_OOM_KILL_STEP=0"}, true, false},
	} {
		env := BatchJobEnv(job7(), BatchEnvConfig{ClusterName: "c", NodeName: "n1", Version: tc.v})
		if _, ok := env.Get("SLURM_NODE_ALIASES"); ok != tc.aliases {
			t.Errorf("0x%04x: SLURM_NODE_ALIASES set %v, want %v", tc.v, ok, tc.aliases)
		}
		ReleaseEnvOf(tc.v, cred, tc.oom).apply(&env)
		for _, kv := range tc.extra {
			k, want, _ := strings.Cut(kv, "=")
			if got, _ := env.Get(k); got != want {
				t.Errorf("0x%04x: %s=%q, want %q", tc.v, k, got, want)
			}
		}
		if _, ok := env.Get("SLURM_JOB_SLUID"); ok != tc.sluid {
			t.Errorf("0x%04x: SLURM_JOB_SLUID set %v, want %v", tc.v, ok, tc.sluid)
		}
		if tc.v < slurmproto.Version2411 {
			if _, ok := env.Get("SLURM_OOM_KILL_STEP"); ok {
				t.Errorf("0x%04x: SLURM_OOM_KILL_STEP set", tc.v)
			}
		}
	}
}

// TestEmptyJobAcct_MatchesStock: the step completion's accounting record
// is byte for byte the one stock 24.11.5 and 26.05.5 step managers sent
// under jobacct_gather/none (the munge golden frames; the auth/slurm ones
// ran jobacct_gather/linux, which slurmd-go does not gather), TRES ids 1-8
// from slurmctld's registration answer; 22.05 and a node without TRES send
// none.
func TestEmptyJobAcct_MatchesStock(t *testing.T) {
	ids := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	for _, f := range []string{"r2411/munge/step_complete_v2a00.bin", "r2605/munge/step_complete_v2d00.bin"} {
		frame, err := os.ReadFile(filepath.Join("../../pkg/slurmproto/testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		m, err := slurmproto.DecodeMessage(frame[4:])
		if err != nil {
			t.Fatal(err)
		}
		b, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
		if err != nil {
			t.Fatal(err)
		}
		sc := *b.(*slurmproto.StepComplete)
		sc.JobAcct = emptyJobAcct(m.Header.Version, ids)
		got, err := slurmproto.EncodeBody(m.Header.Version, &sc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, m.Body) {
			n := 0
			for n < len(got) && got[n] == m.Body[n] {
				n++
			}
			t.Errorf("%s: our step completion differs from stock's at byte %d of %d: % x, stock % x", f, n, len(m.Body), got[n:min(n+12, len(got))], m.Body[n:min(n+12, len(m.Body))])
		}
	}
	if emptyJobAcct(slurmproto.Version2205, ids) != nil || emptyJobAcct(slurmproto.Version2411, nil) != nil {
		t.Error("a record for 22.05 or without TRES ids")
	}
}

// TestBatchEnv_UserEnv: the launch's environment is merged over the login
// environment slurmd loaded (env_array_merge): its names win, the login
// ones it lacks stay in their place, malformed entries are dropped.
func TestBatchEnv_UserEnv(t *testing.T) {
	m := job7()
	m.Environment = []string{"SLURM_GET_USER_ENV=1", "HOME=/from/sbatch", "bogus", "SLURM_UMASK=0022"}
	login := []string{"SHELL=/bin/bash", "HOME=/home/u", "SHLVL=1", "_=/usr/sbin/slurmstepd"}
	env := BatchJobEnv(m, BatchEnvConfig{ClusterName: "c", NodeName: "n1", Version: slurmproto.Version2205, UserEnv: login})
	want := []string{"SHELL=/bin/bash", "HOME=/from/sbatch", "SHLVL=1", "_=/usr/sbin/slurmstepd", "SLURM_GET_USER_ENV=1", "SLURM_UMASK=0022"}
	if len(env) < len(want) || !slices.Equal(env[:len(want)], want) {
		t.Errorf("env starts %q, want %q", env[:min(len(env), len(want))], want)
	}
	if slices.Contains(env, "bogus") {
		t.Errorf("malformed entry kept: %q", env)
	}
	// Without a login environment the launch's entries are kept as given.
	if env := BatchJobEnv(m, BatchEnvConfig{ClusterName: "c", NodeName: "n1", Version: slurmproto.Version2205}); !slices.Contains(env, "bogus") {
		t.Errorf("plain launch environment altered: %q", env)
	}
}
