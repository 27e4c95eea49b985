package gresbind

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/envarray"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// goldenRoot holds the captures of cluster/capture.sh gres (see its README):
// per release and TaskPlugin the launch frames stock slurmd received and,
// under stock/, what each task of stock slurmstepd saw.
const goldenRoot = "../../pkg/slurmproto/testdata/gres"

// goldenDevs are the capture's device numbers of gpu0..gpu3.
var goldenDevs = [4][2]uint32{{1, 7}, {1, 8}, {1, 9}, {5, 2}}

func goldenStat(path string) (gres.DevType, uint32, uint32, error) {
	var n int
	if _, err := fmt.Sscanf(filepath.Base(path), "gpu%d", &n); err != nil || n < 0 || n > 3 {
		return 0, 0, 0, fmt.Errorf("%s: %w", path, gres.ErrNotDevice)
	}
	return gres.DevChar, goldenDevs[n][0], goldenDevs[n][1], nil
}

// goldenProbes are the capture's jobs: frame name, probe name, task count.
var goldenProbes = []struct {
	frame, probe string
	tasks        int
}{
	{"batch_job_launch", "batch", 1},
	{"launch_tasks_inner", "inner", 1},
	{"launch_tasks_pertask", "pertask", 2},
	{"launch_tasks_shard", "shard", 1},
	{"launch_tasks_mapgpu", "mapgpu", 2},
}

var goldenVars = []string{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL",
	"SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_SHARDS_ON_NODE"}

func goldenDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(goldenRoot, "r*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("only %d GRES capture directories under %s", len(dirs), goldenRoot)
	}
	return dirs
}

// goldenNode loads the capture's gres.conf with pkg/gres, as the daemon
// does, and builds the step manager's node from it.
func goldenNode(t *testing.T, dir string, v uint16, local bool) *Node {
	t.Helper()
	types := []string{"gpu", "shard"}
	n, err := gres.Load(context.Background(), gres.Options{
		ConfPath: filepath.Join(dir, "gres.conf"), NodeName: "n1", CPUs: 2, Version: v,
		GresTypes: types, NodeGres: "gpu:4,shard:8",
		Exists: func(string) error { return nil }, Stat: goldenStat,
	})
	if err != nil {
		t.Fatalf("%s: gres.conf: %v", dir, err)
	}
	node, err := NewNode(n.Records, types, v, local, goldenStat)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return node
}

// goldenLaunch decodes one captured launch frame.
func goldenLaunch(t *testing.T, path string) (slurmproto.Body, uint16) {
	t.Helper()
	fr, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := slurmproto.DecodeMessage(fr[4:])
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b, m.Header.Version
}

func framePath(t *testing.T, dir, name string) string {
	t.Helper()
	fs, _ := filepath.Glob(filepath.Join(dir, name+"_v*.bin"))
	if len(fs) != 1 {
		t.Fatalf("%s: %d frames %s_v*.bin", dir, len(fs), name)
	}
	return fs[0]
}

// stockLines reads a stock/ file of the capture ("" lines dropped).
func stockLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func filterGres(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		for _, v := range goldenVars {
			if k == v {
				out = append(out, kv)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestStockGolden_Environment computes each captured task's GRES variables
// from its launch (the credential's GRES, tres_bind, the launch's
// environment) and holds them to what stock slurmstepd gave the task.
func TestStockGolden_Environment(t *testing.T) {
	for _, dir := range goldenDirs(t) {
		local := strings.HasSuffix(dir, "-cg")
		for _, g := range goldenProbes {
			t.Run(filepath.Base(dir)+"/"+g.probe, func(t *testing.T) {
				body, v := goldenLaunch(t, framePath(t, dir, g.frame))
				node := goldenNode(t, dir, v, local)
				for task := 0; task < g.tasks; task++ {
					var env envarray.Env
					switch m := body.(type) {
					case *slurmproto.BatchJobLaunch:
						env = envarray.Env(nil).Merge(m.Environment)
						l := launchOf(t, m.Cred, v, "", 0)
						node.JobEnv(&env, l)
					case *slurmproto.LaunchTasks:
						env = envarray.Env(nil).Merge(m.Env)
						l := launchOf(t, m.Cred, v, slurmproto.CString(m.TresBind), m.AccelBindType)
						node.StepEnv(&env, l)
						if l.HasTaskBinding() {
							node.TaskEnv(&env, l, task)
						}
					default:
						t.Fatalf("%T", body)
					}
					want := stockLines(t, filepath.Join(dir, "stock", fmt.Sprintf("%s.%d.env", g.probe, task)))
					got := filterGres(env)
					if strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Errorf("task %d:\n got %v\nwant %v (stock)", task, got, want)
					}
				}
			})
		}
	}
}

// TestStockGolden_Devices holds each captured task's allowed device files
// (ConstrainDevices=yes captures) to the ones it could open under stock.
func TestStockGolden_Devices(t *testing.T) {
	n := 0
	for _, dir := range goldenDirs(t) {
		if !strings.HasSuffix(dir, "-cg") {
			continue
		}
		for _, g := range goldenProbes {
			t.Run(filepath.Base(dir)+"/"+g.probe, func(t *testing.T) {
				body, v := goldenLaunch(t, framePath(t, dir, g.frame))
				node := goldenNode(t, dir, v, true)
				for task := 0; task < g.tasks; task++ {
					var rules []DeviceRule
					switch m := body.(type) {
					case *slurmproto.BatchJobLaunch:
						rules = node.Devices(launchOf(t, m.Cred, v, "", 0), ScopeJob, 0)
					case *slurmproto.LaunchTasks:
						rules = node.Devices(launchOf(t, m.Cred, v, slurmproto.CString(m.TresBind), m.AccelBindType), ScopeTask, task)
					}
					var got []string
					for _, r := range rules {
						st := "denied"
						if r.Allow {
							st = "ok"
						}
						got = append(got, filepath.Base(r.Path)+" "+st)
					}
					var want []string
					for _, l := range stockLines(t, filepath.Join(dir, "stock", fmt.Sprintf("%s.%d.dev", g.probe, task))) {
						path, st, _ := strings.Cut(l, " ")
						want = append(want, filepath.Base(path)+" "+st)
					}
					if strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Errorf("task %d:\n got %v\nwant %v (stock)", task, got, want)
					}
					n++
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no ConstrainDevices capture")
	}
}

// launchOf is what stepd builds from a credential: its GRES lists at n1's
// index in the job's host list.
func launchOf(t *testing.T, c *slurmproto.Cred, v uint16, tresBind string, accel uint16) *Launch {
	t.Helper()
	job, err := c.JobGres(v)
	if err != nil {
		t.Fatal(err)
	}
	step, err := c.StepGres(v)
	if err != nil {
		t.Fatal(err)
	}
	hl, err := hostlist.Parse(slurmproto.CString(c.JobHostlist))
	if err != nil {
		t.Fatal(err)
	}
	return &Launch{Job: job, Step: step, NodeIndex: hl.Find("n1"), TresBind: tresBind, AccelBindType: accel}
}
