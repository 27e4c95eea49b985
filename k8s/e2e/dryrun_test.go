//go:build integration

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChart_ServerDryRun: the manifests the chart renders for each mode
// pass the real apiserver's server-side dry run (schema, RBAC objects,
// admission); a values set that names no configuration fails to render
// with the reason.
func TestChart_ServerDryRun(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"static-hostPath", []string{"node.name=n1", "config.hostPath=/etc/slurm"}},
		{"static-configMap-authslurm", []string{"config.configMap=slurm-conf", "auth.slurmKeySecret=slurm-key", "auth.mungeSocketDir="}},
		{"dynamic-configless", []string{"node.mode=dynamic", "node.conf=Features=gpu", "controller.host=slurmctld.slurm.svc", "controller.port=6817"}},
		{"unprivileged", []string{"config.configMap=slurm-conf", "unprivileged=true", "nodeSelector.nvidia\\.com/gpu\\.present=true", "resources.limits.memory=1Gi"}},
		{"topology-controller", []string{"config.configMap=slurm-conf", "topology.controller.enabled=true", "topology.controller.plugin=block", "topology.controller.blockSizes={2,4}"}},
		{"topology-controller-file", []string{"config.hostPath=/etc/slurm", "topology.controller.enabled=true", "topology.controller.file=/etc/slurm/topology.conf"}},
		{"statefulset-dynamic", []string{"config.configMap=slurm-conf", "kind=StatefulSet", "replicas=4", "node.mode=dynamic", "placement.sameZone=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "tiee", filepath.Join(e.root, "k8s/chart"), "-n", "default"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			manifests := e.helm(t, args...)
			workload := "kind: DaemonSet"
			if strings.Contains(strings.Join(tc.set, " "), "kind=StatefulSet") {
				workload = "kind: StatefulSet"
			}
			for _, kind := range []string{workload, "kind: ServiceAccount", "kind: ClusterRole", "kind: RoleBinding"} {
				if !strings.Contains(manifests, kind) {
					t.Fatalf("rendered manifests lack %q:\n%s", kind, manifests)
				}
			}
			cmd := exec.Command(filepath.Join(e.bin, "kubectl"), "apply", "--dry-run=server", "-f", "-")
			cmd.Stdin = strings.NewReader(manifests)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("server-side dry run: %v\n%s\nmanifests:\n%s", err, out, manifests)
			}
			want := 6
			if strings.Contains(manifests, "kind: Deployment") {
				want += 6 // the topology controller's
			}
			if workload == "kind: StatefulSet" {
				want++ // its headless Service
			}
			if n := strings.Count(string(out), "(server dry run)"); n < want {
				t.Fatalf("dry run accepted %d objects, want %d:\n%s", n, want, out)
			}
		})
	}
	t.Run("statefulset-one-name", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(e.bin, "helm"), "template", "tiee", filepath.Join(e.root, "k8s/chart"),
			"--set", "config.hostPath=/etc/slurm", "--set", "kind=StatefulSet", "--set", "replicas=2", "--set", "node.name=n1").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "node.name names one node") {
			t.Fatalf("two replicas, one node name: %v\n%s", err, out)
		}
	})
	// The plain manifests are the chart's current output and the API
	// server takes them as `kubectl apply -k` sends them.
	t.Run("manifests", func(t *testing.T) {
		want := e.helm(t, "template", "slurmd-go", filepath.Join(e.root, "k8s/chart"), "-n", "slurm", "--set", "config.configMap=slurm-conf")
		got, err := os.ReadFile(filepath.Join(e.root, "k8s/manifests/slurmd-go.yaml"))
		if err != nil || string(got) != want {
			t.Fatalf("k8s/manifests/slurmd-go.yaml is not the chart's output (run make manifests): %v", err)
		}
		// (kept: deleting it would leave it terminating for a rerun)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slurm"}}
		if _, err := e.cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(e.bin, "kubectl"), "apply", "-k", filepath.Join(e.root, "k8s/manifests"), "--dry-run=server").CombinedOutput()
		if err != nil || strings.Count(string(out), "(server dry run)") < 6 {
			t.Fatalf("kubectl apply -k k8s/manifests --dry-run=server: %v\n%s", err, out)
		}
	})
	t.Run("no-config", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(e.bin, "helm"), "template", "tiee", filepath.Join(e.root, "k8s/chart")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "set config.configMap or config.hostPath") {
			t.Fatalf("helm template without a configuration: %v\n%s", err, out)
		}
	})
}
