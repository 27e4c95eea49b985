//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// k8sNode is the test cluster's one Node (up.sh: --hostname-override).
const k8sNode = "127.0.0.1"

// TestChart_Labels: labels of three vocabularies (Kubernetes zone,
// CoreWeave NVLink domain, Nebius tier) on the pod's Node become the Slurm
// node's features at its first registration; relabelling the zone while a
// job runs reaches slurmctld without restarting the daemon, and the job
// completes normally.
func TestChart_Labels(t *testing.T) {
	e := setup(t)
	keys := []string{"topology.kubernetes.io/zone", "ds.coreweave.com/nvlink.domain", "topology.nebius.com/tier-1"}
	e.labelNode(t, k8sNode, map[string]string{keys[0]: "zone-a", keys[1]: "nvl72.rack7", keys[2]: "leaf-3"})
	t.Cleanup(func() { e.labelNode(t, k8sNode, map[string]string{keys[0]: "", keys[1]: "", keys[2]: ""}) })

	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, Unstarted: []string{"t2"}, NodeExtra: "Feature=own"})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	port := freePort(t)
	e.install(t, "labels", ns, []string{"node.name=t2", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(port)},
		"--set-json", fmt.Sprintf("k8s.featureLabels=[%q,%q,%q]", keys[0], keys[1], keys[2]))
	features := func() []string {
		f := strings.Split(c.ShowNode(t, "t2")["AvailableFeatures"], ",")
		slices.Sort(f)
		return f
	}
	want := func(w ...string) func() (bool, string) {
		slices.Sort(w)
		return func() (bool, string) {
			f := features()
			return slices.Equal(f, w), strings.Join(f, ",")
		}
	}
	c.WaitFor(t, "t2's features from the labels", readyTimeout, want("own", "zone-a", "nvl72.rack7", "leaf-3"))
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	if a := c.ShowNode(t, "t2")["ActiveFeatures"]; !strings.Contains(a, "zone-a") {
		t.Fatalf("ActiveFeatures=%s", a)
	}

	dir := c.WorkDir(t, cluster.TestUser, "labels")
	out := filepath.Join(dir, "out")
	id := c.SbatchIn(t, cluster.TestUser, dir, "#!/bin/sh\nwhile [ ! -e "+filepath.Join(dir, "go")+" ]; do sleep 0.2; done\necho done\n", "-w", "t2", "-C", "zone-a", "-o", out)
	c.WaitJob(t, id, jobTimeout, "RUNNING")
	e.labelNode(t, k8sNode, map[string]string{keys[0]: "zone-b"})
	c.WaitFor(t, "t2's features after the zone changed", readyTimeout, want("own", "zone-b", "nvl72.rack7", "leaf-3"))
	if st := c.ShowJob(t, id)["JobState"]; st != "RUNNING" {
		t.Fatalf("job %s is %s after the relabel, want RUNNING", id, st)
	}
	c.MustRun(t, cluster.TestUser, "touch", filepath.Join(dir, "go"))
	c.WaitJob(t, id, jobTimeout, "COMPLETED")
	// The new zone places jobs, the old one no longer matches.
	c.MustRun(t, cluster.TestUser, "srun", "-C", "zone-b", "-w", "t2", "true")

	// Cordon drains with the k8s: reason, uncordon resumes.
	t.Cleanup(func() { e.cordon(t, false) })
	drained := func(reason string) func() (bool, string) {
		return func() (bool, string) {
			n := c.ShowNode(t, "t2")
			// scontrol appends " [user@time]" to the reason
			return strings.Contains(n["State"], "DRAIN") && strings.HasPrefix(n["Reason"], reason+" ["), n["State"] + " " + n["Reason"]
		}
	}
	e.cordon(t, true)
	c.WaitFor(t, "t2 drained for the cordon", readyTimeout, drained("k8s: node cordoned"))
	e.cordon(t, false)
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	// (24.11's slurmctld keeps showing the last Reason of a resumed node)
	if st := c.ShowNode(t, "t2")["State"]; strings.Contains(st, "DRAIN") {
		t.Fatalf("State=%s after uncordon", st)
	}
	// An administrator's drain survives a cordon and an uncordon.
	c.MustRun(t, "", "scontrol", "update", "nodename=t2", "state=drain", "reason=admin maintenance")
	e.cordon(t, true)
	waitLog(t, c.NodeLog("t2"), "the node is already drained, its reason is kept", 1)
	e.cordon(t, false)
	waitLog(t, c.NodeLog("t2"), "no drain of ours to lift", 1)
	if ok, st := drained("admin maintenance")(); !ok {
		t.Fatalf("the admin's drain after cordon and uncordon: %s", st)
	}
	// The Slurm drain shows on the Node, and goes with the resume.
	e.waitCondition(t, "SlurmNodeDrained", corev1.ConditionTrue, "admin maintenance")
	c.MustRun(t, "", "scontrol", "update", "nodename=t2", "state=resume")
	e.waitCondition(t, "SlurmNodeDrained", corev1.ConditionFalse, "not drained")
	// and the node's state beside it
	e.waitCondition(t, "SlurmNodeState", corev1.ConditionTrue, "IDLE")
}

// waitCondition waits for the Node's condition typ to have status and a
// message containing msg.
func (e env) waitCondition(t *testing.T, typ corev1.NodeConditionType, status corev1.ConditionStatus, msg string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, readyTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, k8sNode, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == typ {
				last = string(c.Status) + " " + c.Message
				return c.Status == status && strings.Contains(c.Message, msg), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Node condition %s never %s with %q within %v; last: %q", typ, status, msg, readyTimeout, last)
	}
}

// cordon sets the Node's spec.unschedulable, as kubectl cordon/uncordon.
func (e env) cordon(t *testing.T, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := e.cs.CoreV1().Nodes().Patch(context.Background(), k8sNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordon=%t: %v", on, err)
	}
}

// waitLog waits until file holds at least n lines containing s.
func waitLog(t *testing.T, file, s string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, readyTimeout, true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile(file)
		return strings.Count(string(b), s) >= n, nil
	})
	if err != nil {
		b, _ := os.ReadFile(file)
		t.Fatalf("%s: no %q within %v:\n%s", file, s, readyTimeout, b)
	}
}
