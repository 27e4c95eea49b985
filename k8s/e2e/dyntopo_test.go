//go:build integration

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// TestChart_DynamicTopology: a dynamic pod node of a 26.05 slurmctld
// (dynamic topology is 25.05's) registers with Topology= from its Node's
// labels, under an upper switch topology.conf has; relabelling the zone
// while a job runs moves the node (a node update) and the job completes.
func TestChart_DynamicTopology(t *testing.T) {
	e := setup(t)
	const region, zone = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
	e.labelNode(t, k8sNode, map[string]string{region: "r1", zone: "za"})
	t.Cleanup(func() { e.labelNode(t, k8sNode, map[string]string{region: "", zone: ""}) })
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Release: "26.05", Nodes: 1,
		ExtraConf: []string{"TopologyPlugin=topology/tree"},
		// r1 must be above the leaves: a new switch goes under an upper one
		TopologyConf: []string{"SwitchName=s0 Nodes=t1", "SwitchName=r1 Switches=s0"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	e.install(t, "dyn", ns, []string{"node.mode=dynamic", "node.name=d1", "node.conf=Features=dyn", "config.hostPath=" + c.Dir,
		"node.port=" + strconv.Itoa(c.SlurmdPort), "probes.port=" + strconv.Itoa(freePort(t))},
		"--set-json", `k8s.topologyLabels=["kubernetes"]`)
	leaf := func(sw string) func() (bool, string) {
		return func() (bool, string) {
			top := topology(t, c)
			var b strings.Builder
			for name, f := range top {
				fmt.Fprintf(&b, "%s Nodes=%s Switches=%s; ", name, f["Nodes"], f["Switches"])
			}
			return top[sw]["Nodes"] == "d1" && strings.Contains(top["r1"]["Switches"], sw), b.String()
		}
	}
	c.WaitFor(t, "d1 under r1:za", readyTimeout, leaf("za"))
	c.WaitNodes(t, "idle", []string{"d1"}, readyTimeout)
	// The first registration carried it (-Z's Topology=), no update did.
	const updated = "node topology updated"
	if b, _ := os.ReadFile(c.NodeLog("d1")); strings.Contains(string(b), updated) {
		t.Fatalf("d1's topology came as an update, not with its first registration:\n%s", b)
	}

	dir := c.WorkDir(t, cluster.TestUser, "dyntopo")
	id := c.SbatchIn(t, cluster.TestUser, dir, "#!/bin/sh\nwhile [ ! -e "+filepath.Join(dir, "go")+" ]; do sleep 0.2; done\necho done\n", "-w", "d1", "-o", filepath.Join(dir, "out"))
	c.WaitJob(t, id, jobTimeout, "RUNNING")
	e.labelNode(t, k8sNode, map[string]string{zone: "zb"})
	c.WaitFor(t, "d1 under r1:zb", readyTimeout, leaf("zb"))
	waitLog(t, c.NodeLog("d1"), updated+": node=d1 topology=default:r1:zb", 1)
	if st := c.ShowJob(t, id)["JobState"]; st != "RUNNING" {
		t.Fatalf("job %s is %s after the move, want RUNNING", id, st)
	}
	c.MustRun(t, cluster.TestUser, "touch", filepath.Join(dir, "go"))
	c.WaitJob(t, id, jobTimeout, "COMPLETED")
}
