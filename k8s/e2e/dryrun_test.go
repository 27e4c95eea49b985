//go:build integration

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "tiee", filepath.Join(e.root, "k8s/chart"), "-n", "default"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			manifests := e.helm(t, args...)
			for _, kind := range []string{"kind: DaemonSet", "kind: ServiceAccount", "kind: ClusterRole", "kind: RoleBinding"} {
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
				want = 12 // and the topology controller's six
			}
			if n := strings.Count(string(out), "(server dry run)"); n < want {
				t.Fatalf("dry run accepted %d objects, want %d:\n%s", n, want, out)
			}
		})
	}
	t.Run("no-config", func(t *testing.T) {
		out, err := exec.Command(filepath.Join(e.bin, "helm"), "template", "tiee", filepath.Join(e.root, "k8s/chart")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "set config.configMap or config.hostPath") {
			t.Fatalf("helm template without a configuration: %v\n%s", err, out)
		}
	})
}
