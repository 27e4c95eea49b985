//go:build integration

package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// Issue 15, the zone guard. Six nodes in two simulated zones (network
// namespaces, one bridge per zone, routed between them by the root namespace,
// where slurmctld and the clients are): za = nodes 1, 3, 5, 6, zb = nodes 2, 4.
// slurmctld has topology/tree over a topology.conf whose leaf switches are the
// zones and spank/topology/job_submit.lua; srun and the nodes load the
// tiee_topology SPANK plugin (probe=all).
//
//   - `srun -N4 --topology=zone` runs in one zone although the first four nodes
//     (slurmctld's pick without it) span both; its tasks get the topology
//     environment; `slurmd-go topology check` says one zone;
//   - the same job without the option straddles: topology check lists it and
//     exits 0, and 1 with --one-zone;
//   - with a drop rule between the zones (a zone-isolating network policy) the
//     straddling job fails within zoneFailBound with a message naming nodes and
//     zones, no task of it left running, while a --topology=zone job runs.
//
// slurmd-go only: the plugin asks the node daemon's topology API
// (internal/topoapi), which stock slurmd does not serve. Slurm 22.05 only:
// the nodes need network namespaces of their own (cluster.Options.Zones).
const (
	zoneFailBound      = 30 * time.Second // the bound for a blocked job
	topoZoneJobTimeout = 90 * time.Second
)

func TestTopology_Zones(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	so := cluster.BuildSpankPlugin(t, "", filepath.Join(root, "spank", "topology", "tiee_topology.c"))
	lua, err := os.ReadFile(filepath.Join(root, "spank", "topology", "job_submit.lua"))
	if err != nil {
		t.Fatal(err)
	}
	zones := []string{"za", "zb", "za", "zb", "za", "za"}
	o := batchOptions(cluster.ImplGo)
	o.Nodes = len(zones)
	o.Zones = zones
	o.JobSubmitLua = string(lua)
	byZone := map[string][]string{}
	for i, z := range zones {
		byZone[z] = append(byZone[z], fmt.Sprintf("%s%d", o.NodePrefix, i+1))
	}
	o.TopologyConf = []string{
		"SwitchName=za Nodes=" + hostlist.Compress(byZone["za"]),
		"SwitchName=zb Nodes=" + hostlist.Compress(byZone["zb"]),
		"SwitchName=top Switches=za,zb",
	}
	// Every RPC goes straight from slurmctld or srun to each node: no slurmd
	// forwards across zones.
	o.ExtraConf = append(o.ExtraConf, "TopologyPlugin=topology/tree", "JobSubmitPlugins=lua", "TreeWidth=65533")
	o.PlugStack = "# set once the cluster's directory is known\n"
	c := cluster.Start(t, o)
	if c.Impl != cluster.ImplGo {
		t.Fatalf("TestTopology_Zones needs slurmd-go (TIEE_SLURMD_IMPL=go): stock slurmd serves no topology API")
	}
	c.SetPlugStack(t, fmt.Sprintf("required %s probe=all probe_timeout=3 socket=%s/spool/%%n/tiee-topology.sock\n", so, c.Dir))
	c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)
	work := c.WorkDir(t, cluster.TestUser, "zones")
	zoneOf := map[string]string{}
	for z, ns := range byZone {
		for _, n := range ns {
			zoneOf[n] = z
		}
	}
	const taskCmd = `echo "$SLURMD_NODENAME ${TIEE_TOPOLOGY_ZONE-none} ${TIEE_TOPOLOGY_ZONES-none} $SLURM_JOB_ID"`
	srunCmd := func(cmd string, args ...string) (cluster.Result, time.Duration) {
		t.Helper()
		start := time.Now()
		r := c.RunClient(t, cluster.BgCmd{Cmd: cluster.Cmd{
			User: cluster.TestUser, Dir: work,
			Args: append(append([]string{"srun", "-N4", "--ntasks-per-node=1"}, args...), "/bin/sh", "-c", cmd),
		}, Timeout: topoZoneJobTimeout})
		return r, time.Since(start)
	}
	srun := func(args ...string) (cluster.Result, time.Duration) { t.Helper(); return srunCmd(taskCmd, args...) }
	// tasks are the job's "node zone zones job" lines.
	type task struct{ node, zone, zones string }
	parse := func(r cluster.Result) (tasks []task, job string) {
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			f := strings.Fields(l)
			if len(f) == 4 {
				tasks = append(tasks, task{f[0], f[1], f[2]})
				job = f[3]
			}
		}
		sort.Slice(tasks, func(i, j int) bool { return tasks[i].node < tasks[j].node })
		return tasks, job
	}
	check := func(job string, extra ...string) (string, int) {
		t.Helper()
		args := append([]string{filepath.Join(root, "bin", "slurmd-go"), "topology", "check", "--topology-conf", c.TopologyConfPath()}, extra...)
		out, errOut, err := c.Exec(t, cluster.Cmd{Args: append(args, job)})
		code := 0
		if err != nil {
			code = -1
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
		}
		return out + errOut, code
	}

	// One zone on request.
	r, _ := srun("--topology=zone")
	tasks, job := parse(r)
	if r.ExitCode != 0 || len(tasks) != 4 {
		t.Fatalf("--topology=zone: %v\nstdout: %s\nstderr: %s", r, r.Stdout, r.Stderr)
	}
	for _, tk := range tasks {
		if zoneOf[tk.node] != "za" || tk.zone != "za" || tk.zones != "za" {
			t.Errorf("--topology=zone: task on %s (zone %s) says zone %s, zones %s; want all in za", tk.node, zoneOf[tk.node], tk.zone, tk.zones)
		}
	}
	if f := c.ShowJob(t, job); !strings.HasPrefix(f["Switches"], "1@") {
		t.Errorf("job %s: Switches=%q, want 1@... (job_submit.lua's req_switch)", job, f["Switches"])
	}
	if out, code := check(job); code != 0 || !strings.Contains(out, "in one zone") {
		t.Errorf("topology check %s: exit %d\n%s", job, code, out)
	}
	t.Logf("--topology=zone: job %s on %v", job, tasks)

	// With one node of za busy, za has three free nodes and zb two: the same
	// job without the option straddles; with it (from an #SBATCH line) it
	// waits for four free nodes in one zone.
	blocker := c.Sbatch(t, cluster.TestUser, "#!/bin/sh\nsleep 600\n", "-N1", "--exclusive", "-w", byZone["za"][0], "-o", "/dev/null")
	c.WaitJob(t, blocker, topoZoneJobTimeout, "RUNNING")
	waiter := c.SbatchIn(t, cluster.TestUser, work, "#!/bin/sh\n#SBATCH --topology=zone\n#SBATCH -N4 --ntasks-per-node=1\nsrun /bin/sh -c '"+taskCmd+"'\n", "-o", filepath.Join(work, "waiter.out"))
	r, _ = srun()
	tasks, job = parse(r)
	if r.ExitCode != 0 || len(tasks) != 4 {
		t.Fatalf("no option: %v\nstdout: %s\nstderr: %s", r, r.Stdout, r.Stderr)
	}
	if tasks[0].zones != "za,zb" {
		t.Errorf("no option: tasks %v, want a job over za and zb", tasks)
	}
	out, code := check(job)
	if code != 0 || !strings.Contains(out, "straddles 2 zones") {
		t.Errorf("topology check %s: exit %d, want 0 and the straddle listed\n%s", job, code, out)
	}
	if out, code := check(job, "--one-zone"); code != 1 {
		t.Errorf("topology check --one-zone %s: exit %d, want 1\n%s", job, code, out)
	}
	t.Logf("topology check of the straddling job %s:\n%s", job, out)
	if f := c.ShowJob(t, waiter); f["JobState"] != "PENDING" {
		t.Errorf("#SBATCH --topology=zone job %s with no four free nodes in one zone: %s (%s) on %s, want PENDING", waiter, f["JobState"], f["Reason"], f["NodeList"])
	} else {
		t.Logf("#SBATCH --topology=zone job %s waits: Reason=%s", waiter, f["Reason"])
	}

	// The blocker ends: the waiting job runs, in za.
	if _, errOut, err := c.Run(t, "", "scancel", blocker); err != nil {
		t.Fatalf("scancel %s: %v: %s", blocker, err, errOut)
	}
	if f := c.WaitJob(t, waiter, topoZoneJobTimeout, cluster.JobTerminalStates...); f["JobState"] != "COMPLETED" {
		t.Errorf("#SBATCH --topology=zone job %s: %s %s on %s", waiter, f["JobState"], f["ExitCode"], f["NodeList"])
	}
	b, _ := os.ReadFile(filepath.Join(work, "waiter.out"))
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) != 4 || zoneOf[f[0]] != "za" || f[1] != "za" {
			t.Errorf("#SBATCH --topology=zone job %s printed %q, want tasks in za only", waiter, l)
		}
	}
	t.Logf("#SBATCH --topology=zone job %s ran once four nodes of za were free:\n%s", waiter, b)

	// Zones isolated (the blocker back, so that a 4-node job must straddle):
	// the straddling job fails fast, none of its tasks runs; a one-zone job runs.
	c.BlockZones(t, true)
	defer c.BlockZones(t, false)
	blocker = c.Sbatch(t, cluster.TestUser, "#!/bin/sh\nsleep 600\n", "-N1", "--exclusive", "-w", byZone["za"][0], "-o", "/dev/null")
	c.WaitJob(t, blocker, topoZoneJobTimeout, "RUNNING")
	// A task that would hang, as a collective waiting for a peer would.
	const hang = "sleep 4242"
	r, took := srunCmd("echo started; exec " + hang)
	if strings.Contains(r.Stdout, "started") {
		t.Errorf("blocked zones: tasks of the straddling job started: %q", r.Stdout)
	}
	if took > zoneFailBound {
		t.Errorf("blocked zones: the straddling job took %v to fail, want under %v", took, zoneFailBound)
	}
	// 22.05's srun exits 0 on a launch its nodes' user_init refused, as stock.
	if !strings.Contains(r.Stderr, "tiee-topology: job") || !strings.Contains(r.Stderr, "cannot reach") ||
		!strings.Contains(r.Stderr, "(zone za)") || !strings.Contains(r.Stderr, "(zone zb)") || !strings.Contains(r.Stderr, "launch failed") {
		t.Errorf("blocked zones: srun's stderr does not name the nodes and zones:\n%s", r.Stderr)
	}
	t.Logf("blocked zones: the straddling job failed after %v (srun exit %d):\n%s", took.Round(100*time.Millisecond), r.ExitCode, r.Stderr)
	if _, errOut, err := c.Run(t, "", "scancel", blocker); err != nil {
		t.Fatalf("scancel %s: %v: %s", blocker, err, errOut)
	}
	c.WaitFor(t, "no job left", topoZoneJobTimeout, func() (bool, string) {
		q := c.Squeue(t)
		return len(q) == 0, strings.Join(q, "; ")
	})
	if out, err := exec.Command("pgrep", "-f", hang).Output(); err == nil {
		t.Errorf("blocked zones: tasks of the failed job still run: pids %s", strings.Fields(string(out)))
	}
	r, _ = srun("--topology=zone")
	if tasks, _ := parse(r); r.ExitCode != 0 || len(tasks) != 4 || tasks[0].zones != "za" {
		t.Errorf("blocked zones: --topology=zone job: %v\nstdout: %s\nstderr: %s", r, r.Stdout, r.Stderr)
	}
}
