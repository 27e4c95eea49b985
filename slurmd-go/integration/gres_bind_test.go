//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// gresDevs are the device numbers of the test's four "GPUs": char devices of
// the mem driver (/dev/full, /dev/random, /dev/urandom, /dev/ptmx), so that
// opening one works unless the device cgroup denies it (EPERM).
var gresDevs = [4][2]uint32{{1, 7}, {1, 8}, {1, 9}, {5, 2}}

// gresJobTimeout bounds one GRES job or step of TestGresBind.
const gresJobTimeout = 90 * time.Second

// gresVars are the variables GRES binding sets.
var gresVars = []string{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL",
	"SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_SHARDS_ON_NODE"}

// makeGresDevices creates dir/gpu0..gpu3 (mode 0666) for gres.conf's File=.
func makeGresDevices(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tiee-gresdev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, d := range gresDevs {
		p := filepath.Join(dir, fmt.Sprintf("gpu%d", i))
		dev := int((d[0] << 8) | d[1]) // old_encode_dev: major < 4096, minor < 256
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, dev); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func gresOptions(impl, devDir string) cluster.Options {
	return cluster.Options{
		Impl:       impl,
		Nodes:      1,
		NodePrefix: cluster.RandomNodePrefix(),
		Tmpfs:      true,
		NodeExtra:  "Gres=gpu:4,shard:8",
		GresConf: []string{
			"Name=gpu File=" + devDir + "/gpu[0-3]",
			"Name=shard Count=8 File=" + devDir + "/gpu[0-3]",
		},
		CgroupConf: []string{
			"CgroupPlugin=autodetect",
			"CgroupMountpoint=/sys/fs/cgroup",
			"ConstrainDevices=yes",
		},
		ExtraConf: []string{
			"GresTypes=gpu,shard",
			"ProctrackType=proctrack/cgroup",
			"TaskPlugin=task/cgroup",
			"MinJobAge=600",
		},
	}
}

// gresProbe writes, per task, the GRES variables and which device files open
// to DIR/TAG.<procid>.{env,dev}.
func gresProbe(devDir string) string {
	return `#!/bin/sh
o="$1/$2.${SLURM_PROCID:-0}"
env | grep -E '^(` + strings.Join(gresVars, "|") + `)=' | sort > "$o.env.tmp"
for f in ` + devDir + `/gpu0 ` + devDir + `/gpu1 ` + devDir + `/gpu2 ` + devDir + `/gpu3; do
	if true < "$f" 2>/dev/null; then echo "${f##*/} ok"; else echo "${f##*/} denied"; fi
done > "$o.dev.tmp"
mv "$o.env.tmp" "$o.env"; mv "$o.dev.tmp" "$o.dev"
`
}

// gresCase is one job or step of TestGresBind and what the reference must show.
type gresCase struct {
	name  string
	batch bool     // sbatch (the batch step) instead of srun
	args  []string // sbatch/srun arguments
	tasks int
	// opens is how many of the four device files each task may open (-1:
	// as many as its SLURM_*_GPUS names).
	opens int
}

var gresCases = []gresCase{
	{name: "BatchGPU2", batch: true, args: []string{"--gres=gpu:2"}, tasks: 1, opens: 2},
	{name: "PerTask", args: []string{"-n2", "--gpus-per-task=1"}, tasks: 2, opens: 1},
	{name: "Shard", args: []string{"-n1", "--gres=shard:2"}, tasks: 1, opens: -1},
	{name: "MapGPU", args: []string{"-n2", "--gres=gpu:3", "--gpu-bind=map_gpu:2,0"}, tasks: 2, opens: 1},
}

// gresResult is what each task of a case saw: its GRES variables and opens.
type gresResult struct {
	env, dev []string // per task, the files' lines
	err      string   // why the case did not run ("" when it ran)
}

// runGresCase runs one case on c as TestUser and reads its tasks' files.
func runGresCase(t *testing.T, c *cluster.Cluster, probe string, gc gresCase) gresResult {
	dir := c.WorkDir(t, cluster.TestUser, "gres", gc.name)
	script := filepath.Join(dir, "probe.sh")
	if err := os.WriteFile(script, []byte(probe), 0o755); err != nil {
		return gresResult{err: err.Error()}
	}
	if err := os.Chmod(script, 0o755); err != nil {
		return gresResult{err: err.Error()}
	}
	n := node(c, 0)
	if gc.batch {
		args := append([]string{"-w", n, "-o", filepath.Join(dir, "slurm-%j.out")}, gc.args...)
		id, err := c.SbatchErr(cluster.TestUser, dir, "#!/bin/sh\nexec "+script+" "+dir+" "+gc.name+"\n", args...)
		if err != nil {
			return gresResult{err: "sbatch: " + err.Error()}
		}
		if st, ok := gresJobEnded(t, c, id, gresJobTimeout); !ok || st != "COMPLETED" {
			return gresResult{err: fmt.Sprintf("job %s: %s", id, st)}
		}
	} else {
		args := append([]string{"srun", "-w", n, "-D", dir, "-t", "2"}, gc.args...)
		args = append(args, script, dir, gc.name)
		if out, serr, err := c.Exec(t, cluster.Cmd{User: cluster.TestUser, Args: args, Dir: dir, CleanEnv: true}); err != nil {
			return gresResult{err: fmt.Sprintf("srun: %v\n%s%s", err, out, serr)}
		}
	}
	var r gresResult
	for i := 0; i < gc.tasks; i++ {
		base := filepath.Join(dir, fmt.Sprintf("%s.%d", gc.name, i))
		env, err1 := os.ReadFile(base + ".env")
		dev, err2 := os.ReadFile(base + ".dev")
		if err1 != nil || err2 != nil {
			return gresResult{err: fmt.Sprintf("task %d wrote no probe output: %v %v", i, err1, err2)}
		}
		r.env = append(r.env, strings.TrimSpace(string(env)))
		r.dev = append(r.dev, strings.TrimSpace(string(dev)))
	}
	return r
}

// gresJobEnded waits for a finished job state without t.Fatal (onBoth goroutines).
func gresJobEnded(t *testing.T, c *cluster.Cluster, id string, timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	for {
		jobs, err := c.ShowJobsErr(t, id)
		st := ""
		if err == nil && len(jobs) > 0 {
			st = jobs[0]["JobState"]
		}
		switch st {
		case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL":
			return st, true
		}
		if time.Now().After(deadline) {
			return "still " + st + " after " + timeout.String(), false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGresBind: a node with four static GPUs and eight shards in gres.conf
// (device files the test creates), TaskPlugin=task/cgroup with
// ConstrainDevices=yes. sbatch --gres=gpu:2, srun --gpus-per-task=1 -n2, a
// shard step and --gpu-bind=map_gpu: each task's GRES variables and which
// device files it can open, on stock slurmd and the daemon under test in the
// same run; the reference must show each task only its own devices.
func TestGresBind(t *testing.T) {
	devDir := makeGresDevices(t)
	p := startPair(t, func(impl string) cluster.Options { return gresOptions(impl, devDir) })
	probe := gresProbe(devDir)
	t.Run("NodeGres", func(t *testing.T) {
		ref, sut := onBoth(p, func(c *cluster.Cluster) string {
			f, err := c.ShowNodeErr(t, node(c, 0))
			if err != nil {
				return err.Error()
			}
			return f["Gres"]
		})
		if ref != "gpu:4,shard:8" {
			t.Errorf("reference node Gres=%q", ref)
		}
		if sut != ref {
			t.Errorf("node Gres: under test %q, reference %q", sut, ref)
		}
	})
	for _, gc := range gresCases {
		gc := gc
		t.Run(gc.name, func(t *testing.T) {
			ref, sut := onBoth(p, func(c *cluster.Cluster) gresResult { return runGresCase(t, c, probe, gc) })
			if ref.err != "" {
				t.Fatalf("reference: %s", ref.err)
			}
			checkGresOwnDevices(t, "reference", gc, ref)
			if sut.err != "" {
				t.Fatalf("under test: %s", sut.err)
			}
			for i := range ref.env {
				if ref.env[i] != sut.env[i] {
					t.Errorf("task %d environment:\nreference:\n%s\nunder test:\n%s", i, ref.env[i], sut.env[i])
				}
				if ref.dev[i] != sut.dev[i] {
					t.Errorf("task %d device opens:\nreference:\n%s\nunder test:\n%s", i, ref.dev[i], sut.dev[i])
				}
			}
		})
	}
}

// checkGresOwnDevices holds the reference to the case's expectation: each
// task opens exactly its devices, and they are the ones its SLURM_*_GPUS
// name (node-wide indexes: gpuN is index N).
func checkGresOwnDevices(t *testing.T, who string, gc gresCase, r gresResult) {
	t.Helper()
	for i := range r.dev {
		var ok []string
		for _, l := range strings.Split(r.dev[i], "\n") {
			if name, st, _ := strings.Cut(l, " "); st == "ok" {
				ok = append(ok, strings.TrimPrefix(name, "gpu"))
			}
		}
		env := map[string]string{}
		for _, l := range strings.Split(r.env[i], "\n") {
			if k, v, found := strings.Cut(l, "="); found {
				env[k] = v
			}
		}
		ids := env["SLURM_STEP_GPUS"]
		if gc.batch {
			ids = env["SLURM_JOB_GPUS"]
		}
		named := strings.Split(ids, ",")
		sort.Strings(named)
		want := gc.opens
		if want < 0 {
			want = len(named)
		}
		if len(ok) != want {
			t.Errorf("%s task %d opens %v, want %d device(s):\n%s", who, i, ok, want, r.dev[i])
		}
		if gc.name != "MapGPU" && gc.name != "PerTask" && strings.Join(named, ",") != strings.Join(ok, ",") {
			t.Errorf("%s task %d: GPUs named %q, devices opened %v", who, i, ids, ok)
		}
		if _, err := strconv.Atoi(env["SLURM_GPUS_ON_NODE"]); err != nil {
			t.Errorf("%s task %d: SLURM_GPUS_ON_NODE=%q", who, i, env["SLURM_GPUS_ON_NODE"])
		}
	}
}
