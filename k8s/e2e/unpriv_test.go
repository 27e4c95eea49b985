//go:build integration

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// TestChart_Unprivileged: in the chart's unprivileged mode (no privileged
// container, the listed capabilities only, a read-only root) the pod
// registers and runs jobs as root and as an ordinary user, whose tasks
// hold no capability; with a capability missing from the list the daemon
// stops at start and the pod's status names it.
func TestChart_Unprivileged(t *testing.T) {
	e := setup(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, Unstarted: []string{"t2"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	e.install(t, "unpriv", ns, []string{"node.name=t2", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(freePort(t)), "unprivileged=true"})
	pod := e.pod(t, ns, "unpriv")
	if sc := pod.Spec.Containers[0].SecurityContext; sc == nil || sc.Privileged == nil || *sc.Privileged ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Fatalf("unprivileged pod's security context: %+v", sc)
	}
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	e.ready(t, ns, pod.Name, corev1.ConditionTrue)
	for _, user := range []string{"root", cluster.TestUser} {
		out := c.MustRun(t, user, "srun", "-w", "t2", "-N1", "sh", "-c", "id -un; grep kubepods -c /proc/self/cgroup; grep CapEff /proc/self/status")
		f := strings.Fields(out)
		if len(f) != 4 || f[0] != user || f[1] == "0" {
			t.Fatalf("srun as %s in the unprivileged pod: %q", user, out)
		}
		if user != "root" && f[3] != "0000000000000000" {
			t.Fatalf("%s's task holds capabilities %s", user, f[3])
		}
	}

	// Without CAP_SETUID the daemon cannot run tasks as their users: it
	// stops at start, naming it. (The first pod goes: both hold t2's port.)
	e.helm(t, "uninstall", "unpriv", "-n", ns, "--wait", "--timeout", "60s")
	e.install(t, "nosetuid", ns, []string{"node.name=t2", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(freePort(t)), "unprivileged=true"},
		"--set-json", `capabilities=["SETGID","KILL","CHOWN","FOWNER","DAC_OVERRIDE"]`)
	var msg string
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, podTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=nosetuid"})
		if err != nil || len(l.Items) != 1 || len(l.Items[0].Status.ContainerStatuses) != 1 {
			return false, nil
		}
		cs := l.Items[0].Status.ContainerStatuses[0]
		for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if term != nil {
				msg = term.Message
				return term.ExitCode != 0, nil
			}
		}
		return false, nil
	})
	if err != nil || !strings.Contains(msg, "missing privilege: CAP_SETUID (run tasks as their users)") {
		t.Fatalf("the pod without CAP_SETUID: %v, termination message %q (%s)", err, msg, e.describe(ns))
	}
}
