//go:build integration

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// TestChart_Configless: a pod that mounts no slurm.conf joins as Slinky's
// do, configless (controller.host/port: --conf-server): it fetches the
// files from slurmctld (REQUEST_CONFIG), registers, runs jobs as root and
// as an ordinary user, and takes the files slurmctld pushes on reconfigure
// (REQUEST_RECONFIGURE_WITH_CONFIG) into its cache.
func TestChart_Configless(t *testing.T) {
	e := setup(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, Unstarted: []string{"t2"},
		ExtraConf: []string{"SlurmctldParameters=enable_configless"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	e.install(t, "configless", ns, []string{"node.name=t2", "controller.host=127.0.0.1", "controller.port=" + strconv.Itoa(c.CtldPort),
		"probes.port=" + strconv.Itoa(freePort(t))})
	pod := e.pod(t, ns, "configless")
	for _, v := range pod.Spec.Volumes {
		if v.Name == "slurm-conf" {
			t.Fatalf("the configless pod mounts a configuration: %+v", v)
		}
	}
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	e.ready(t, ns, pod.Name, corev1.ConditionTrue)
	for _, user := range []string{"root", cluster.TestUser} {
		if out := strings.TrimSpace(c.MustRun(t, user, "srun", "-w", "t2", "id", "-un")); out != user {
			t.Fatalf("srun as %s on the configless node: %q", user, out)
		}
	}
	// The fetch says where the cache is (the pod's log: before slurm.conf
	// there is no SlurmdLogFile).
	m := regexp.MustCompile(`configuration fetched: .*cache=(\S+)`).FindStringSubmatch(e.podLog(t, ns, pod.Name))
	if m == nil {
		t.Fatalf("the pod's log has no fetch line:\n%s", e.podLog(t, ns, pod.Name))
	}
	cache := m[1]
	want := filepath.Join(c.Dir, "spool", "t2", "conf-cache")
	if cache != want {
		t.Fatalf("conf-cache %s, want %s (SlurmdSpoolDir with %%n)", cache, want)
	}
	orig, err := os.ReadFile(c.ConfPath)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "slurm.conf")); err != nil || string(b) != string(orig) {
		t.Fatalf("cached slurm.conf differs from slurmctld's: %v\n%s", err, b)
	}

	// A reconfigure pushes the changed slurm.conf.
	c.SetConf(t, "SlurmctldParameters=enable_configless", "MinJobAge=301")
	c.MustRun(t, "", "scontrol", "reconfigure")
	c.WaitFor(t, "the pushed slurm.conf in the cache", readyTimeout, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(cache, "slurm.conf"))
		return strings.Contains(string(b), "MinJobAge=301"), ""
	})
	waitLog(t, c.NodeLog("t2"), "configless: configuration pushed by slurmctld cached", 1)
	c.MustRun(t, cluster.TestUser, "srun", "-w", "t2", "true")
}

// podLog is a pod's log so far.
func (e env) podLog(t *testing.T, ns, name string) string {
	t.Helper()
	b, err := e.cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, name, err)
	}
	return string(b)
}
