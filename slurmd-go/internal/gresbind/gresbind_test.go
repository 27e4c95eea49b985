package gresbind

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/envarray"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeStat answers /dev/nvidiaN as char 195:N.
func fakeStat(path string) (gres.DevType, uint32, uint32, error) {
	var n uint32
	if _, err := fmt.Sscanf(path, "/dev/nvidia%d", &n); err == nil {
		return gres.DevChar, 195, n, nil
	}
	return 0, 0, 0, fmt.Errorf("%s: %w", path, gres.ErrNotDevice)
}

var allEnv = gres.Flags{EnvNVML: true, EnvRSMI: true, EnvOneAPI: true, EnvOpenCL: true, EnvDefault: true, HasFile: true}

func node4(t *testing.T, v uint16, local bool) *Node {
	t.Helper()
	recs := []gres.Record{
		{Name: "gpu", Count: 4, File: "/dev/nvidia[0-3]", Flags: allEnv},
		{Name: "shard", Count: 8, File: "/dev/nvidia[0-3]", Flags: gres.Flags{HasFile: true, Shared: true}},
	}
	n, err := NewNode(recs, []string{"shard", "gpu"}, v, local, fakeStat)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func bm(n int, set ...int) *slurmproto.Bitmap {
	b := slurmproto.NewBitmap(n)
	for _, i := range set {
		b.Set(i)
	}
	return b
}

// gresEnv lists the GRES variables of env, sorted.
func gresEnv(env envarray.Env) string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL",
			"SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_SHARDS_ON_NODE":
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func stepLaunch(nodeIdx int, bind string, gpu *slurmproto.Bitmap, shard *slurmproto.Bitmap, shardCnt uint64, perBit []uint64) *Launch {
	l := &Launch{NodeIndex: nodeIdx, TresBind: bind}
	if gpu != nil {
		l.Step = append(l.Step, slurmproto.GresStepState{PluginID: slurmproto.GresBuildID("gpu"), NodeCnt: 1,
			CntNodeAlloc: []uint64{uint64(gpu.Count())}, BitAlloc: []*slurmproto.Bitmap{gpu}})
	}
	if shard != nil {
		r := slurmproto.GresStepState{PluginID: slurmproto.GresBuildID("shard"), NodeCnt: 1,
			CntNodeAlloc: []uint64{shardCnt}, BitAlloc: []*slurmproto.Bitmap{shard}}
		if perBit != nil {
			r.PerBitAlloc = [][]uint64{perBit}
		}
		l.Step = append(l.Step, r)
	}
	return l
}

func TestNewNode_OrderAndDevices(t *testing.T) {
	n := node4(t, slurmproto.Version2205, false)
	if len(n.Plugins) != 2 || n.Plugins[0].Name != "gpu" || n.Plugins[1].Name != "shard" || !n.Plugins[1].Shared {
		t.Fatalf("plugins %+v", n.Plugins)
	}
	if len(n.Plugins[1].Devices) != 4 || n.Plugins[1].Devices[3].Minor != 3 {
		t.Errorf("shard devices %+v", n.Plugins[1].Devices)
	}
	if !n.Env.NVML || !n.Env.OpenCL {
		t.Errorf("env flags %+v", n.Env)
	}
	_, err := NewNode([]gres.Record{{Name: "gpu", File: "/tmp/x[0-1]"}}, []string{"gpu"}, slurmproto.Version2205, false, fakeStat)
	if err == nil || !strings.Contains(err.Error(), "/tmp/x0") {
		t.Errorf("bad device file: %v", err)
	}
}

func TestJobEnv_BatchGPUs(t *testing.T) {
	n := node4(t, slurmproto.Version2205, false)
	l := &Launch{NodeIndex: 1, Job: []slurmproto.GresJobState{{PluginID: slurmproto.GresBuildID("gpu"), NodeCnt: 2,
		CntNodeAlloc: []uint64{1, 2}, BitAlloc: []*slurmproto.Bitmap{bm(4, 0), bm(4, 1, 3)}}}}
	env := envarray.Env{"CUDA_VISIBLE_DEVICES=9", "SLURM_SHARDS_ON_NODE=3"}
	n.JobEnv(&env, l)
	// The shard plugin, with GPUs allocated, leaves the user's
	// SLURM_SHARDS_ON_NODE alone (GRES_INTERNAL_FLAG_PROTECT_ENV).
	want := "CUDA_VISIBLE_DEVICES=1,3 GPU_DEVICE_ORDINAL=1,3 ROCR_VISIBLE_DEVICES=1,3 SLURM_GPUS_ON_NODE=2 SLURM_JOB_GPUS=1,3 SLURM_SHARDS_ON_NODE=3 ZE_AFFINITY_MASK=1,3"
	if got := gresEnv(env); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Under ConstrainDevices the device variables count from 0.
	n = node4(t, slurmproto.Version2205, true)
	env = nil
	n.JobEnv(&env, l)
	want = "CUDA_VISIBLE_DEVICES=0,1 GPU_DEVICE_ORDINAL=0,1 ROCR_VISIBLE_DEVICES=0,1 SLURM_GPUS_ON_NODE=2 SLURM_JOB_GPUS=1,3 ZE_AFFINITY_MASK=0,1"
	if got := gresEnv(env); got != want {
		t.Errorf("local: got  %s\nwant %s", got, want)
	}
	// A job without GRES has them unset, whatever the user exported.
	env = envarray.Env{"CUDA_VISIBLE_DEVICES=0", "SLURM_JOB_GPUS=0"}
	n.JobEnv(&env, &Launch{})
	if got := gresEnv(env); got != "" {
		t.Errorf("no gres: %s", got)
	}
}

func TestTaskEnv_PerTask(t *testing.T) {
	for _, c := range []struct {
		v     uint16
		local bool
		bind  string
		want  [2]string
	}{
		{slurmproto.Version2205, false, "gpu:per_task:1", [2]string{"1", "2"}},
		{slurmproto.Version2411, false, "gres/gpu:per_task:1", [2]string{"1", "2"}},
		{slurmproto.Version2205, true, "gpu:per_task:1", [2]string{"0", "0"}},
		{slurmproto.Version2605, true, "gres/gpu:per_task:1", [2]string{"0", "0"}},
		// 24.11 reads gres/gpu:, not 22.05's gpu:; a binding that names
		// no gres/gpu leaves the task without device variables.
		{slurmproto.Version2411, false, "gpu:per_task:1", [2]string{"", ""}},
		{slurmproto.Version2205, false, "gpu:map_gpu:2,1", [2]string{"2", "1"}},
		{slurmproto.Version2205, false, "gpu:mask_gpu:0x4", [2]string{"2", "2"}},
		{slurmproto.Version2411, false, "gres/gpu:map:1*1,2", [2]string{"1", "2"}},
		{slurmproto.Version2411, false, "gres/gpu:none", [2]string{"1,2", "1,2"}},
	} {
		n := node4(t, c.v, c.local)
		l := stepLaunch(0, c.bind, bm(4, 1, 2), nil, 0, nil)
		for task := 0; task < 2; task++ {
			env := envarray.Env{}
			n.StepEnv(&env, l)
			if l.HasTaskBinding() {
				n.TaskEnv(&env, l, task)
			}
			got, _ := env.Get("CUDA_VISIBLE_DEVICES")
			if got != c.want[task] {
				t.Errorf("v%x local=%v %q task %d: CUDA_VISIBLE_DEVICES=%q, want %q (%s)", c.v, c.local, c.bind, task, got, c.want[task], gresEnv(env))
			}
		}
	}
}

func TestStepEnv_ShardKeepsGPUVars(t *testing.T) {
	n := node4(t, slurmproto.Version2411, false)
	// A shard step without GPUs: the shard plugin sets the GPU variables.
	l := stepLaunch(0, "", nil, bm(4, 2), 3, []uint64{0, 0, 3, 0})
	env := envarray.Env{}
	n.StepEnv(&env, l)
	want := "CUDA_VISIBLE_DEVICES=2 GPU_DEVICE_ORDINAL=2 ROCR_VISIBLE_DEVICES=2 SLURM_GPUS_ON_NODE=1 SLURM_SHARDS_ON_NODE=3 SLURM_STEP_GPUS=2 ZE_AFFINITY_MASK=2"
	if got := gresEnv(env); got != want {
		t.Errorf("shard: got  %s\nwant %s", got, want)
	}
	// GPUs and no shard: the shard plugin must not clear them.
	l = stepLaunch(0, "", bm(4, 0), nil, 0, nil)
	env = envarray.Env{}
	n.StepEnv(&env, l)
	if got, _ := env.Get("CUDA_VISIBLE_DEVICES"); got != "0" {
		t.Errorf("gpu step: %s", gresEnv(env))
	}
}

func TestTaskEnv_SharedPerTask(t *testing.T) {
	n := node4(t, slurmproto.Version2411, false)
	// Two shards on GPU 0 and two on GPU 1; one task takes two.
	l := stepLaunch(0, "gres/shard:per_task:2", nil, bm(4, 0, 1), 4, []uint64{2, 2, 0, 0})
	var got []string
	for task := 0; task < 2; task++ {
		env := envarray.Env{}
		n.StepEnv(&env, l)
		n.TaskEnv(&env, l, task)
		v, _ := env.Get("CUDA_VISIBLE_DEVICES")
		got = append(got, v)
	}
	if strings.Join(got, " ") != "0 1" {
		t.Errorf("shard per task: %v", got)
	}
}

func TestUniqueIDInLocalList(t *testing.T) {
	recs := []gres.Record{{Name: "gpu", File: "/dev/nvidia0", UniqueID: "MIG-abc", Flags: allEnv}}
	for _, c := range []struct {
		v    uint16
		uuid bool
		want string
	}{{slurmproto.Version2411, false, "MIG-abc"}, {slurmproto.Version2605, false, "0"}, {slurmproto.Version2605, true, "MIG-abc"}} {
		r := recs
		r[0].Flags.UUID = c.uuid
		n, err := NewNode(r, []string{"gpu"}, c.v, false, fakeStat)
		if err != nil {
			t.Fatal(err)
		}
		env := envarray.Env{}
		n.StepEnv(&env, stepLaunch(0, "", bm(1, 0), nil, 0, nil))
		if got, _ := env.Get("CUDA_VISIBLE_DEVICES"); got != c.want {
			t.Errorf("v%x uuid=%v: %q, want %q", c.v, c.uuid, got, c.want)
		}
		if got, _ := env.Get("SLURM_STEP_GPUS"); got != "0" {
			t.Errorf("global list %q", got)
		}
	}
}

func TestDevices_Scopes(t *testing.T) {
	n := node4(t, slurmproto.Version2205, true)
	l := stepLaunch(0, "gpu:per_task:1", bm(4, 1, 2), nil, 0, nil)
	l.Job = []slurmproto.GresJobState{{PluginID: slurmproto.GresBuildID("gpu"), NodeCnt: 1, BitAlloc: []*slurmproto.Bitmap{bm(4, 1, 2, 3)}}}
	allowed := func(rs []DeviceRule) string {
		var out []string
		for _, r := range rs {
			if r.Allow {
				out = append(out, r.Path)
			}
		}
		if len(rs) != 4 {
			out = append(out, fmt.Sprintf("(%d rules)", len(rs)))
		}
		return strings.Join(out, ",")
	}
	if got := allowed(n.Devices(l, ScopeJob, 0)); got != "/dev/nvidia1,/dev/nvidia2,/dev/nvidia3" {
		t.Errorf("job: %s", got)
	}
	if got := allowed(n.Devices(l, ScopeStep, 0)); got != "/dev/nvidia1,/dev/nvidia2" {
		t.Errorf("step: %s", got)
	}
	// Per task: the devices are the node's (global), whatever LocalIndex.
	if got := allowed(n.Devices(l, ScopeTask, 1)); got != "/dev/nvidia2" {
		t.Errorf("task 1: %s", got)
	}
	l.TresBind = "gpu:map_gpu:1"
	if got := allowed(n.Devices(l, ScopeTask, 0)); got != "/dev/nvidia2" {
		t.Errorf("map_gpu:1 under local indexes, task 0: %s", got)
	}
}
