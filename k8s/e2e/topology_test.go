//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// standIn is the second Kubernetes Node: a Node object without a kubelet
// (this machine runs one), for t2, a slurmd-go on the host. Its pod is
// bound to it and never runs; the topology controller reads only the
// Node's labels and the pod's placement.
const standIn = "tiee-topo-b"

// labelNode sets (value) or removes ("") labels of a Node.
func (e env) labelNode(t *testing.T, node string, labels map[string]string) {
	t.Helper()
	m := map[string]any{}
	for k, v := range labels {
		if v == "" {
			m[k] = nil
		} else {
			m[k] = v
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": m}})
	if _, err := e.cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label node %s: %v", node, err)
	}
}

// standInPod makes the Node standIn and a slurmd-go pod bound to it that
// names Slurm node slurm; the test's end removes both.
func (e env) standInPod(t *testing.T, ns, slurm string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: standIn}}
	if _, err := e.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Node %s: %v", standIn, err)
	}
	t.Cleanup(func() { e.cs.CoreV1().Nodes().Delete(context.Background(), standIn, metav1.DeleteOptions{}) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stand-in-" + slurm, Namespace: ns,
			// not the DaemonSet's instance: it must not adopt the pod
			Labels:      map[string]string{"app.kubernetes.io/name": "slurmd-go", "app.kubernetes.io/instance": "stand-in"},
			Annotations: map[string]string{"tiee.io/slurm-node": slurm}},
		Spec: corev1.PodSpec{NodeName: standIn, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "slurmd", Image: "localhost/tiee/slurmd-go:dev", ImagePullPolicy: corev1.PullNever}}},
	}
	if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
	// No kubelet confirms its deletion: force it.
	t.Cleanup(func() {
		zero := int64(0)
		e.cs.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

// showTopology is `scontrol show topology [NAME]`, one field map per line
// (nil while scontrol fails).
func showTopology(t *testing.T, c *cluster.Cluster, name ...string) []map[string]string {
	t.Helper()
	out, _, err := c.Run(t, "", append([]string{"scontrol", "show", "topology"}, name...)...)
	if err != nil {
		return nil
	}
	var lines []map[string]string
	for _, line := range strings.Split(out, "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		lines = append(lines, f)
	}
	return lines
}

// topology is topology/tree's: switch -> its fields.
func topology(t *testing.T, c *cluster.Cluster) map[string]map[string]string {
	t.Helper()
	sw := map[string]map[string]string{}
	for _, f := range showTopology(t, c) {
		if f["SwitchName"] != "" {
			sw[f["SwitchName"]] = f
		}
	}
	return sw
}

// waitTopology waits for slurmctld's topology to be want (switch ->
// "Nodes=..." of a leaf or "Switches=..." of an upper switch), exactly,
// and for topology.conf and the ConfigMap to hold the same switches.
func (e env) waitTopology(t *testing.T, c *cluster.Cluster, ns, what string, want map[string]string) {
	t.Helper()
	c.WaitFor(t, what, readyTimeout, func() (bool, string) {
		got := topology(t, c)
		ok := len(got) == len(want)
		var b strings.Builder
		for name, f := range got {
			k, _, _ := strings.Cut(want[name], "=")
			fmt.Fprintf(&b, "%s %s=%s; ", name, k, f[k])
			if want[name] == "" || k+"="+f[k] != want[name] {
				ok = false
			}
		}
		return ok, b.String()
	})
	file, err := os.ReadFile(c.TopologyConfPath())
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range want {
		if line := "SwitchName=" + name + " " + f + "\n"; !bytes.Contains(file, []byte(line)) {
			t.Fatalf("%s lacks %q:\n%s", c.TopologyConfPath(), line, file)
		}
	}
	cm, err := e.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "topo-topology", metav1.GetOptions{})
	if err != nil || cm.Data["topology.conf"] != string(file) {
		t.Fatalf("ConfigMap %s/topo-topology: %v\n%q\nwant the file's\n%q", ns, err, cm.Data["topology.conf"], file)
	}
}

// controllerLog is the topology controller pod's log ("" until it has one).
func (e env) controllerLog(ctx context.Context, ns string) string {
	l, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=slurmd-go-topology"})
	if err != nil || len(l.Items) != 1 {
		return ""
	}
	r, err := e.cs.CoreV1().Pods(ns).GetLogs(l.Items[0].Name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return ""
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// waitControllerLog waits until the controller has logged s n times.
func (e env) waitControllerLog(t *testing.T, ns, s string, n int) string {
	t.Helper()
	var logs string
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, readyTimeout, true, func(ctx context.Context) (bool, error) {
		logs = e.controllerLog(ctx, ns)
		return strings.Count(logs, s) >= n, nil
	})
	if err != nil {
		t.Fatalf("the topology controller did not log %q %d times within %v:\n%s", s, n, readyTimeout, logs)
	}
	return logs
}

// check runs `slurmd-go topology check` against the cluster, with the
// cluster's scontrol.
func (e env) check(t *testing.T, c *cluster.Cluster, ns string, args ...string) (string, int) {
	t.Helper()
	sc, err := c.Command("", "", "scontrol")
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "scontrol")
	q := make([]string, len(sc.Args))
	for i, a := range sc.Args {
		q[i] = strconv.Quote(a)
	}
	script := fmt.Sprintf("#!/bin/sh\nexport SLURM_CONF=%q\nexec %s \"$@\"\n", c.ConfPath, strings.Join(q, " "))
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(e.root, "bin/slurmd-go"), append([]string{"topology", "check", "--scontrol", wrapper, "--pod-namespace", ns}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestTopology: the chart's topology controller writes topology.conf from
// the Nodes' labels in three vocabularies (Kubernetes, CoreWeave, Nebius)
// into a ConfigMap and slurmctld's directory, and slurmctld takes it
// (`scontrol show topology`); a label set that places no topology is
// logged and never written; a relabel while a job runs reaches slurmctld
// and the job completes; `topology check` lists the job's nodes with pod,
// Node and zone, and fails a job that straddles zones.
func TestTopology(t *testing.T) {
	e := setup(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, Unstarted: []string{"t1"},
		ExtraConf:    []string{"TopologyPlugin=topology/tree"},
		TopologyConf: []string{"SwitchName=s0 Nodes=t[1-2]"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)

	const (
		region = "topology.kubernetes.io/region"
		zone   = "topology.kubernetes.io/zone"
		cwFab  = "ib.coreweave.cloud/fabric"
		cwPod  = "ib.coreweave.cloud/superpod"
		cwLeaf = "ib.coreweave.cloud/leafgroup"
		cwNVL  = "ds.coreweave.com/nvlink.domain"
		nb2    = "topology.nebius.com/tier-2"
		nb1    = "topology.nebius.com/tier-1"
		nb0    = "topology.nebius.com/tier-0"
	)
	clear := func(node string) {
		e.labelNode(t, node, map[string]string{region: "", zone: "", cwFab: "", cwPod: "", cwLeaf: "", cwNVL: "", nb2: "", nb1: "", nb0: ""})
	}
	// Round 1, the Kubernetes vocabulary: region, zone.
	e.labelNode(t, k8sNode, map[string]string{region: "r1", zone: "za"})
	t.Cleanup(func() { clear(k8sNode) })
	e.install(t, "topo", ns, []string{"node.name=t1", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(freePort(t)),
		"nodeSelector.kubernetes\\.io/hostname=" + k8sNode,
		"topology.controller.enabled=true", "topology.controller.file=" + c.TopologyConfPath(), "topology.controller.minInterval=1s",
		"topology.controller.driftPeriod=1s", "topology.controller.nodeSelector.kubernetes\\.io/hostname=" + k8sNode},
		"--set-json", fmt.Sprintf("k8s.featureLabels=[%q]", zone))
	e.standInPod(t, ns, "t2")
	e.labelNode(t, standIn, map[string]string{region: "r1", zone: "zb"})
	c.WaitNodes(t, "idle", []string{"t1", "t2"}, readyTimeout)
	e.waitTopology(t, c, ns, "the Kubernetes vocabulary's topology", map[string]string{"za": "Nodes=t1", "zb": "Nodes=t2", "r1": "Switches=za,zb"})
	c.WaitFor(t, "t1's zone feature", readyTimeout, func() (bool, string) {
		f := c.ShowNode(t, "t1")["AvailableFeatures"]
		return f == "za", f
	})

	// Round 2, CoreWeave's: fabric, superpod, leaf group (and NVLink
	// domain); detected because both Nodes have all of them.
	e.labelNode(t, k8sNode, map[string]string{cwFab: "f1", cwPod: "sp1", cwLeaf: "lg1", cwNVL: "nvl-a"})
	e.labelNode(t, standIn, map[string]string{cwFab: "f1", cwPod: "sp1", cwLeaf: "lg2", cwNVL: "nvl-b"})
	e.waitTopology(t, c, ns, "CoreWeave's topology", map[string]string{"lg1": "Nodes=t1", "lg2": "Nodes=t2", "sp1": "Switches=lg1,lg2", "f1": "Switches=sp1"})

	// Round 3, Nebius's: tier-2, tier-1 (tier-0 the block).
	for _, n := range []string{k8sNode, standIn} {
		clear(n)
	}
	e.labelNode(t, k8sNode, map[string]string{zone: "za", nb2: "spine-1", nb1: "leaf-a", nb0: "nvl-a"})
	e.labelNode(t, standIn, map[string]string{zone: "zb", nb2: "spine-1", nb1: "leaf-b", nb0: "nvl-b"})
	nebius := map[string]string{"leaf-a": "Nodes=t1", "leaf-b": "Nodes=t2", "spine-1": "Switches=leaf-a,leaf-b"}
	e.waitTopology(t, c, ns, "Nebius's topology", nebius)

	// A broken label set: the stand-in's Node loses its tier and zone, so
	// no vocabulary places both nodes. Logged; slurmctld keeps Nebius's.
	const kept = "topology not written, slurmctld keeps the last one"
	before, _ := os.ReadFile(c.TopologyConfPath())
	n := strings.Count(e.controllerLog(context.Background(), ns), kept)
	e.labelNode(t, standIn, map[string]string{nb1: "", zone: ""})
	logs := e.waitControllerLog(t, ns, kept, n+1)
	if !strings.Contains(logs, "no label vocabulary is complete on every Node") {
		t.Fatalf("the controller's log does not say why:\n%s", logs)
	}
	e.waitTopology(t, c, ns, "Nebius's topology kept", nebius)
	if after, _ := os.ReadFile(c.TopologyConfPath()); !bytes.Equal(after, before) {
		t.Fatalf("topology.conf changed by a broken label set:\n%s", after)
	}
	e.labelNode(t, standIn, map[string]string{nb1: "leaf-b", zone: "zb"})

	// Someone edits topology.conf: drift, reported and overwritten.
	if err := os.WriteFile(c.TopologyConfPath(), []byte("SwitchName=edited Nodes=t[1-2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.waitControllerLog(t, ns, "topology drift: what slurmctld reads differs from the Nodes' labels", 1)
	c.WaitFor(t, "topology.conf rewritten", readyTimeout, func() (bool, string) {
		b, _ := os.ReadFile(c.TopologyConfPath())
		return bytes.Equal(b, before), string(b)
	})
	e.waitTopology(t, c, ns, "Nebius's topology kept after the drift", nebius)

	// A job on both nodes straddles zones za and zb; relabelling t1's leaf
	// while it runs reaches slurmctld and the job completes.
	dir := c.WorkDir(t, cluster.TestUser, "topology")
	id := c.SbatchIn(t, cluster.TestUser, dir, "#!/bin/sh\nwhile [ ! -e "+filepath.Join(dir, "go")+" ]; do sleep 0.2; done\nsrun -N2 true\necho done\n",
		"-N2", "-w", "t[1-2]", "-o", filepath.Join(dir, "out"))
	c.WaitJob(t, id, jobTimeout, "RUNNING")
	out, code := e.check(t, c, ns, "--one-zone", id)
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 4 {
			rows[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if code != 1 || !strings.Contains(out, "straddles 2 zones: za (t1), zb (t2)") ||
		rows["t2"] != ns+"/stand-in-t2 "+standIn+" zb" || !strings.HasSuffix(rows["t1"], " "+k8sNode+" za") {
		t.Fatalf("topology check of the straddling job %s: exit %d\n%s", id, code, out)
	}
	e.labelNode(t, k8sNode, map[string]string{nb1: "leaf-c"})
	e.waitTopology(t, c, ns, "the relabel while the job runs", map[string]string{"leaf-c": "Nodes=t1", "leaf-b": "Nodes=t2", "spine-1": "Switches=leaf-b,leaf-c"})
	if st := c.ShowJob(t, id)["JobState"]; st != "RUNNING" {
		t.Fatalf("job %s is %s after the relabel, want RUNNING", id, st)
	}
	c.MustRun(t, cluster.TestUser, "touch", filepath.Join(dir, "go"))
	c.WaitJob(t, id, jobTimeout, "COMPLETED")

	// A job inside one zone passes the check.
	one := c.SbatchIn(t, cluster.TestUser, dir, "#!/bin/sh\nsleep 30\n", "-w", "t1", "-o", "/dev/null")
	c.WaitJob(t, one, jobTimeout, "RUNNING")
	if out, code := e.check(t, c, ns, "--one-zone", one); code != 0 || !strings.Contains(out, "in one zone") {
		t.Fatalf("topology check of job %s on t1: exit %d\n%s", one, code, out)
	}
	c.MustRun(t, "", "scancel", one)
}

// blocks is topology/block's (of topology.yaml's topology NAME): block -> nodes.
func blocks(t *testing.T, c *cluster.Cluster, name ...string) map[string]string {
	t.Helper()
	b := map[string]string{}
	for _, f := range showTopology(t, c, name...) {
		if f["BlockName"] != "" {
			b[f["BlockName"]] = f["Nodes"]
		}
	}
	return b
}

// TestTopology_Block: on 24.11 (topology/block is 23.11's) the controller
// writes BlockName lines from the NVLink-domain label of CoreWeave's
// vocabulary, and slurmctld shows those blocks; a relabel moves a node.
func TestTopology_Block(t *testing.T) {
	e := setup(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Release: "24.11", Nodes: 2, Unstarted: []string{"t1"},
		ExtraConf:    []string{"TopologyPlugin=topology/block"},
		TopologyConf: []string{"BlockName=b0 Nodes=t[1-2]"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	const fab, pod, leaf, nvl = "ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup", "ds.coreweave.com/nvlink.domain"
	cw := func(domain string) map[string]string {
		return map[string]string{fab: "f1", pod: "sp1", leaf: "lg1", nvl: domain}
	}
	e.labelNode(t, k8sNode, cw("nvl72-a"))
	t.Cleanup(func() { e.labelNode(t, k8sNode, map[string]string{fab: "", pod: "", leaf: "", nvl: ""}) })
	e.install(t, "topo", ns, []string{"node.name=t1", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(freePort(t)),
		"nodeSelector.kubernetes\\.io/hostname=" + k8sNode,
		"topology.controller.enabled=true", "topology.controller.plugin=block", "topology.controller.file=" + c.TopologyConfPath(),
		"topology.controller.minInterval=1s", "topology.controller.nodeSelector.kubernetes\\.io/hostname=" + k8sNode},
		"--set-json", `topology.controller.labels=["coreweave"]`)
	e.standInPod(t, ns, "t2")
	e.labelNode(t, standIn, cw("nvl72-b"))
	want := func(w map[string]string) func() (bool, string) {
		return func() (bool, string) {
			got := blocks(t, c)
			ok := len(got) == len(w)
			for k, v := range w {
				g, _ := hostlist.Expand(got[k]) // t1,t2 or t[1-2]
				ok = ok && strings.Join(g, ",") == v
			}
			return ok, fmt.Sprint(got)
		}
	}
	c.WaitFor(t, "the NVLink domains as blocks", readyTimeout, want(map[string]string{"nvl72-a": "t1", "nvl72-b": "t2"}))
	if b, _ := os.ReadFile(c.TopologyConfPath()); !strings.Contains(string(b), "BlockName=nvl72-a Nodes=t1\nBlockName=nvl72-b Nodes=t2\n") {
		t.Fatalf("topology.conf:\n%s", b)
	}
	e.labelNode(t, standIn, cw("nvl72-a"))
	c.WaitFor(t, "t2 in t1's block", readyTimeout, want(map[string]string{"nvl72-a": "t1,t2"}))
}

// TestTopology_YAML: on 26.05 (topology.yaml is 25.05's) the controller
// writes topology.yaml: a tree topology "default" from CoreWeave's fabric,
// superpod and leaf group, and "default-block" from the NVLink domains;
// slurmctld, which started without either, takes both.
func TestTopology_YAML(t *testing.T) {
	e := setup(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Release: "26.05", Nodes: 2, Unstarted: []string{"t1"}})
	t.Cleanup(c.Stop)
	ns := "tiee-" + strings.ToLower(c.Name)
	const fab, pod, leaf, nvl = "ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup", "ds.coreweave.com/nvlink.domain"
	e.labelNode(t, k8sNode, map[string]string{fab: "f1", pod: "sp1", leaf: "lg1", nvl: "nvl72-a"})
	t.Cleanup(func() { e.labelNode(t, k8sNode, map[string]string{fab: "", pod: "", leaf: "", nvl: ""}) })
	yamlPath := filepath.Join(c.Dir, "topology.yaml")
	e.install(t, "topo", ns, []string{"node.name=t1", "config.hostPath=" + c.Dir, "probes.port=" + strconv.Itoa(freePort(t)),
		"nodeSelector.kubernetes\\.io/hostname=" + k8sNode,
		"topology.controller.enabled=true", "topology.controller.format=yaml", "topology.controller.file=" + yamlPath,
		"topology.controller.minInterval=1s", "topology.controller.nodeSelector.kubernetes\\.io/hostname=" + k8sNode})
	e.standInPod(t, ns, "t2")
	e.labelNode(t, standIn, map[string]string{fab: "f1", pod: "sp1", leaf: "lg2", nvl: "nvl72-b"})
	c.WaitFor(t, "both topologies of topology.yaml in slurmctld", readyTimeout, func() (bool, string) {
		sw, bl := topology(t, c), blocks(t, c, "default-block")
		ok := sw["lg1"]["Nodes"] == "t1" && sw["lg2"]["Nodes"] == "t2" && sw["sp1"]["Switches"] == "lg1,lg2" && sw["f1"]["Switches"] == "sp1" &&
			bl["nvl72-a"] == "t1" && bl["nvl72-b"] == "t2"
		return ok, fmt.Sprint(sw, bl)
	})
	b, err := os.ReadFile(yamlPath)
	if err != nil || !strings.Contains(string(b), "- topology: default\n  cluster_default: true\n  tree:") || !strings.Contains(string(b), "- topology: default-block") {
		t.Fatalf("topology.yaml (%v):\n%s", err, b)
	}
	cm, err := e.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "topo-topology", metav1.GetOptions{})
	if err != nil || cm.Data["topology.yaml"] != string(b) {
		t.Fatalf("ConfigMap: %v %q", err, cm.Data)
	}
}
