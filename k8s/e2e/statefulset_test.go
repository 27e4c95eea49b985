//go:build integration

package e2e

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// TestChart_StatefulSet: a node set as a StatefulSet of dynamic nodes
// (Slinky's way): pod set-0 registers as Slurm node set-0, with the
// trainer placement (its pods in one zone, one per node), and runs jobs
// as an ordinary user.
func TestChart_StatefulSet(t *testing.T) {
	e := setup(t)
	const zone = "topology.kubernetes.io/zone"
	e.labelNode(t, k8sNode, map[string]string{zone: "za"})
	t.Cleanup(func() { e.labelNode(t, k8sNode, map[string]string{zone: ""}) })
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 1})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	e.install(t, "set", ns, []string{"kind=StatefulSet", "replicas=1", "node.mode=dynamic", "node.conf=Features=set", "config.hostPath=" + c.Dir,
		"node.port=" + strconv.Itoa(c.SlurmdPort), "probes.port=" + strconv.Itoa(freePort(t)), "placement.sameZone=true"})
	pod := e.pod(t, ns, "set")
	if pod.Name != "set-0" {
		t.Fatalf("pod %s, want set-0", pod.Name)
	}
	a := pod.Spec.Affinity
	if a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != zone {
		t.Fatalf("pod affinity %+v, want the set in one zone", a)
	}
	if tsc := pod.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].MaxSkew != 1 {
		t.Fatalf("topology spread %+v, want one pod per node", tsc)
	}
	c.WaitNodes(t, "idle", []string{"set-0"}, readyTimeout)
	e.ready(t, ns, pod.Name, corev1.ConditionTrue)
	if f := c.ShowNode(t, "set-0")["AvailableFeatures"]; !strings.Contains(f, "set") {
		t.Fatalf("set-0 features %q", f)
	}
	if out := strings.TrimSpace(c.MustRun(t, cluster.TestUser, "srun", "-w", "set-0", "id", "-un")); out != cluster.TestUser {
		t.Fatalf("srun on set-0: %q", out)
	}
}
