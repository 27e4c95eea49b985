//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// Named waits; each polls state.
const (
	podTimeout   = 3 * time.Minute
	readyTimeout = 2 * time.Minute
	jobTimeout   = 2 * time.Minute
	pollEvery    = 500 * time.Millisecond
)

// env is what k8s/realcluster/test.sh exports.
type env struct {
	root, bin, sock string
	cs              *kubernetes.Clientset
}

func setup(t *testing.T) env {
	t.Helper()
	e := env{bin: os.Getenv("TIEE_K8S_BIN"), sock: os.Getenv("TIEE_K8S_CONTAINERD")}
	kc := os.Getenv("KUBECONFIG")
	if kc == "" || e.bin == "" || e.sock == "" {
		t.Fatal("KUBECONFIG, TIEE_K8S_BIN and TIEE_K8S_CONTAINERD must name the cluster of k8s/realcluster/up.sh: run make k8s-test")
	}
	wd, _ := os.Getwd()
	e.root = filepath.Clean(filepath.Join(wd, "../.."))
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(e.root, "bin/slurmd-go-image.tar")
	if out, err := exec.Command("ctr", "--address", e.sock, "-n", "k8s.io", "images", "import", img).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", img, err, out)
	}
	return e
}

func (e env) helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// install installs the chart as release name in namespace ns with the
// --set values set (and any further helm flags), and uninstalls it when
// the test ends.
func (e env) install(t *testing.T, name, ns string, set []string, flags ...string) {
	t.Helper()
	args := []string{"install", name, filepath.Join(e.root, "k8s/chart"), "-n", ns, "--create-namespace"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	e.helm(t, append(args, flags...)...)
	t.Cleanup(func() {
		exec.Command(filepath.Join(e.bin, "helm"), "uninstall", name, "-n", ns, "--wait", "--timeout", "60s").Run()
		// The last release's namespace goes with it (helm leaves it).
		e.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
}

// pod waits for the release's one pod to be Running and returns it.
func (e env) pod(t *testing.T, ns, release string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, podTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil || len(l.Items) != 1 {
			return false, nil
		}
		pod = &l.Items[0]
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod of %s/%s not Running within %v: %v (%s)", ns, release, podTimeout, err, e.describe(ns))
	}
	return pod
}

// ready waits for the pod's Ready condition to be want.
func (e env) ready(t *testing.T, ns, name string, want corev1.ConditionStatus) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, readyTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == want, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s Ready never %s within %v: %v (%s)", ns, name, want, readyTimeout, err, e.describe(ns))
	}
}

func (e env) describe(ns string) string {
	l, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range l.Items {
		fmt.Fprintf(&b, "pod %s phase %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Message)
		}
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " container %s restarts %d state %+v", cs.Name, cs.RestartCount, cs.State)
		}
		b.WriteString("; ")
	}
	ev, _ := e.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if ev != nil {
		for _, x := range ev.Items {
			fmt.Fprintf(&b, "event %s %s: %s; ", x.InvolvedObject.Name, x.Reason, x.Message)
		}
	}
	return b.String()
}

// probe GETs path on the daemon's HTTP port.
func probe(port int, path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, strings.TrimSpace(string(b))
}

// waitProbe polls path until it answers code, and returns the body.
func waitProbe(t *testing.T, port int, path string, code int) string {
	t.Helper()
	var got int
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, readyTimeout, true, func(context.Context) (bool, error) {
		got, body = probe(port, path)
		return got == code, nil
	})
	if err != nil {
		t.Fatalf("%s on :%d: %d %q, want %d", path, port, got, body, code)
	}
	return body
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestChart: the chart's pod is node t2 of a real slurmctld (a mounted
// slurm.conf): Running and not Ready while slurmctld is down, Ready once
// registered, running sbatch and srun jobs inside the pod as root and as
// an ordinary user; a node whose registration slurmctld finds invalid
// stays not Ready with the reason.
func TestChart(t *testing.T) {
	e := setup(t)
	badPort := freePort(t)
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, Unstarted: []string{"t2"},
		// t9 claims 64 CPUs: slurmctld finds its registration invalid.
		ExtraConf: []string{fmt.Sprintf("NodeName=t9 NodeAddr=127.0.0.1 NodeHostname=localhost Port=%d CPUs=64 RealMemory=100", badPort)}})
	t.Cleanup(c.Stop)
	var t2 cluster.Node
	for _, n := range c.Nodes {
		if n.Name == "t2" {
			t2 = n
		}
	}
	ns := "tiee-" + strings.ToLower(c.Name)
	httpPort := freePort(t)
	set := []string{"node.name=t2", "config.hostPath=" + c.Dir, "node.port=" + strconv.Itoa(t2.Port), "probes.port=" + strconv.Itoa(httpPort)}

	// Not Ready before registration: slurmctld is down.
	c.KillCtld(t, syscall.SIGTERM)
	e.install(t, "slurmd", ns, set)
	pod := e.pod(t, ns, "slurmd")
	if body := waitProbe(t, httpPort, "/livez", 200); body != "ok" {
		t.Fatalf("/livez: %q", body)
	}
	if body := waitProbe(t, httpPort, "/readyz", 503); !strings.Contains(body, "not registered") {
		t.Fatalf("/readyz before registration: %q", body)
	}
	e.ready(t, ns, pod.Name, corev1.ConditionFalse)

	c.StartCtld(t)
	c.WaitNodes(t, "idle", []string{"t2"}, readyTimeout)
	e.ready(t, ns, pod.Name, corev1.ConditionTrue)
	if code, body := probe(httpPort, "/readyz"); code != 200 {
		t.Fatalf("/readyz registered: %d %q", code, body)
	}

	// Jobs run in the pod: their cgroup is the pod's.
	for _, user := range []string{"root", cluster.TestUser} {
		out := c.MustRun(t, user, "srun", "-w", "t2", "-N1", "sh", "-c", "id -un; grep -c kubepods /proc/self/cgroup")
		if f := strings.Fields(out); len(f) != 2 || f[0] != user || f[1] == "0" {
			t.Fatalf("srun as %s on the pod's node: %q, want the user and the pod's cgroups", user, out)
		}
		dir := c.WorkDir(t, user, "chart")
		id := c.SbatchIn(t, user, dir, "#!/bin/sh\nid -un\ngrep -c kubepods /proc/self/cgroup\n", "-w", "t2", "-o", filepath.Join(dir, "out"))
		c.WaitJob(t, id, jobTimeout, "COMPLETED")
		b, err := os.ReadFile(filepath.Join(dir, "out"))
		if f := strings.Fields(string(b)); err != nil || len(f) != 2 || f[0] != user || f[1] == "0" {
			t.Fatalf("sbatch as %s: %q %v", user, b, err)
		}
	}

	// A refused registration: t9 is not Ready and says why.
	bad := freePort(t)
	e.install(t, "refused", ns, []string{"node.name=t9", "config.hostPath=" + c.Dir, "node.port=" + strconv.Itoa(badPort), "probes.port=" + strconv.Itoa(bad)})
	badPod := e.pod(t, ns, "refused")
	waitProbeBody(t, bad, "invalid registration")
	e.ready(t, ns, badPod.Name, corev1.ConditionFalse)
	st, err := c.NodeStates(t, "t9")
	if err != nil || !strings.Contains(st["t9"], "drain") && !strings.Contains(st["t9"], "inval") {
		t.Fatalf("t9 state %v %v, want drained or invalid", st, err)
	}
	// t2 is still Ready and serving.
	e.ready(t, ns, pod.Name, corev1.ConditionTrue)
}

// waitProbeBody polls /readyz until its body contains want.
func waitProbeBody(t *testing.T, port int, want string) string {
	t.Helper()
	var body string
	var code int
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, readyTimeout, true, func(context.Context) (bool, error) {
		code, body = probe(port, "/readyz")
		return code == 503 && strings.Contains(body, want), nil
	})
	if err != nil {
		t.Fatalf("/readyz on :%d: %d %q, want 503 with %q", port, code, body, want)
	}
	return body
}
