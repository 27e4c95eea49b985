//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// testCondition stands for a node-problem-detector's or GPU health
// checker's Node condition.
const testCondition = "TieeTestUnhealthy"

// setCondition sets the Node's testCondition to status, or removes it ("").
func (e env) setCondition(t *testing.T, status corev1.ConditionStatus) {
	t.Helper()
	c := map[string]any{"type": testCondition}
	if status == "" {
		c["$patch"] = "delete"
	} else {
		now := metav1.Now()
		c["status"], c["reason"], c["message"], c["lastHeartbeatTime"], c["lastTransitionTime"] = status, "TestProblem", "set by TestChart_Drains", now, now
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{c}}})
	if _, err := e.cs.CoreV1().Nodes().Patch(context.Background(), k8sNode, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("condition %s=%s: %v", testCondition, status, err)
	}
}

// TestChart_Drains: a bad Node condition drains the node with a "k8s:"
// reason and its end resumes it; deleting the pod drains the node first
// (preStop), and the next pod's daemon lifts that drain.
func TestChart_Drains(t *testing.T) {
	e := setup(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, Unstarted: []string{"t2"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	e.install(t, "drains", ns, []string{"node.name=t2", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(freePort(t))},
		"--set-json", `k8s.drainConditions=["Ready",`+strconv.Quote(testCondition)+`]`)
	pod := e.pod(t, ns, "drains")
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	drained := func(reason string) func() (bool, string) {
		return func() (bool, string) {
			n := c.ShowNode(t, "t2")
			return strings.Contains(n["State"], "DRAIN") && strings.HasPrefix(n["Reason"], reason+" ["), n["State"] + " " + n["Reason"]
		}
	}

	t.Cleanup(func() { e.setCondition(t, "") })
	e.setCondition(t, corev1.ConditionTrue)
	c.WaitFor(t, "t2 drained for the Node condition", readyTimeout, drained("k8s: node condition "+testCondition+"=True"))
	e.setCondition(t, corev1.ConditionFalse)
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)

	// The pod goes: its preStop drains t2; the DaemonSet's next pod
	// registers and lifts that drain.
	if err := e.cs.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, c.CtldLog(), "k8s: pod deleted", 1)
	var next *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, podTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=drains"})
		if err != nil || len(l.Items) != 1 || l.Items[0].Name == pod.Name {
			return false, nil
		}
		next = &l.Items[0]
		return next.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("no next pod Running within %v: %v (%s)", podTimeout, err, e.describe(ns))
	}
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	e.ready(t, ns, next.Name, corev1.ConditionTrue)
	// (the daemon logs to slurm.conf's SlurmdLogFile, not the pod's log)
	b, _ := os.ReadFile(c.NodeLog("t2"))
	lifted := false
	for _, line := range strings.Split(string(b), "\n") {
		lifted = lifted || strings.Contains(line, "Kubernetes no longer asks for a drain: node resumed") && strings.Contains(line, "k8s: pod deleted")
	}
	if !lifted {
		t.Fatalf("the next pod's daemon did not log lifting the preStop drain:\n%s", b)
	}
	c.MustRun(t, cluster.TestUser, "srun", "-w", "t2", "true")
}
