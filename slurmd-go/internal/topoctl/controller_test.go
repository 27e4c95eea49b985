package topoctl

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/k8stopo"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(name, on, slurm string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app.kubernetes.io/name": "slurmd-go"}},
		Spec: corev1.PodSpec{NodeName: on}}
	if slurm != "" {
		p.Annotations = map[string]string{SlurmNodeAnnotation: slurm}
	}
	return p
}

func zone(z string) map[string]string {
	return map[string]string{"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": z}
}

func TestDesired(t *testing.T) {
	nodes := []*corev1.Node{node("k1", zone("za")), node("k2", zone("zb"))}
	sts := pod("set-0", "k1", "")
	sts.Labels[NodeNameLabel] = "pod" // a StatefulSet's dynamic node
	pods := []*corev1.Pod{pod("p2", "k2", "gpu2"), pod("p1", "k1", ""), pod("pending", "", "x"), sts}
	m, err := Desired(pods, nodes, k8stopo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m[0].Node != "gpu2" || m[1].Node != "k1" || m[2].Node != "set-0" || m[0].Tiers[1] != "zb" || m[1].Tiers[1] != "za" || m[2].Tiers[1] != "za" {
		t.Fatalf("%+v", m)
	}
	// One Node loses its zone: nothing, and the error names the node.
	nodes[1] = node("k2", map[string]string{"topology.kubernetes.io/region": "r1"})
	if _, err := Desired(pods, nodes, k8stopo.Config{}); !errors.Is(err, ErrLabels) || !strings.Contains(err.Error(), "k2") {
		t.Fatalf("detect with a node lacking the zone: %v", err)
	}
	kube, _ := k8stopo.VocabularyNamed("kubernetes")
	if _, err := Desired(pods, nodes, k8stopo.Config{Vocabulary: kube}); !errors.Is(err, ErrLabels) || !strings.Contains(err.Error(), "node gpu2 (Node k2)") {
		t.Fatalf("configured keys with a node lacking the zone: %v", err)
	}
	if _, err := Desired(nil, nodes, k8stopo.Config{}); !errors.Is(err, ErrLabels) {
		t.Fatalf("no pods: %v", err)
	}
	if _, err := Desired([]*corev1.Pod{pod("p", "gone", "")}, nodes, k8stopo.Config{}); !errors.Is(err, ErrLabels) {
		t.Fatalf("pod on a missing Node: %v", err)
	}
}

type countRC struct{ n atomic.Int32 }

func (c *countRC) Reconfigure(context.Context) error { c.n.Add(1); return nil }

// syncBuf is a log buffer safe to read while the controller writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestController_Run: the first topology is written to the ConfigMap and
// the file and slurmctld reconfigured once; a broken label set is logged
// and changes nothing; a change inside MinInterval is held back.
func TestController_Run(t *testing.T) {
	cs := fake.NewSimpleClientset(node("k1", zone("za")), node("k2", zone("zb")), pod("p1", "k1", "n1"), pod("p2", "k2", "n2"))
	file := filepath.Join(t.TempDir(), "topology.conf")
	var logs syncBuf
	rc := &countRC{}
	c := New(Config{PodNamespace: "ns", PodSelector: "app.kubernetes.io/name=slurmd-go", ConfigMapNamespace: "ns", ConfigMapName: "topo",
		File: file, MinInterval: time.Hour}, cs, rc, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "first reconfigure", func() bool { return rc.n.Load() == 1 })
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := "SwitchName=za Nodes=n1\nSwitchName=zb Nodes=n2\nSwitchName=r1 Switches=za,zb\n"
	if !strings.HasSuffix(string(b), want) {
		t.Fatalf("topology.conf:\n%s\nwant ending\n%s", b, want)
	}
	cm, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "topo", metav1.GetOptions{})
	if err != nil || cm.Data[ConfigMapKey] != string(b) {
		t.Fatalf("ConfigMap %v: %q", err, cm.Data)
	}

	// k2 loses its zone label: logged, nothing written.
	if _, err := cs.CoreV1().Nodes().Update(ctx, node("k2", map[string]string{"topology.kubernetes.io/region": "r1"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken labels logged", func() bool {
		return strings.Contains(logs.String(), "topology not written, slurmctld keeps the last one")
	})
	if !strings.Contains(logs.String(), "k2") {
		t.Fatalf("the log does not name the Node:\n%s", logs.String())
	}
	// k2 moves to zone zc: held back for MinInterval.
	if _, err := cs.CoreV1().Nodes().Update(ctx, node("k2", zone("zc")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the change held back", func() bool { return strings.Contains(logs.String(), "reconfigure held back") })
	if n := rc.n.Load(); n != 1 {
		t.Fatalf("%d reconfigures inside MinInterval", n)
	}
	if b2, _ := os.ReadFile(file); string(b2) != string(b) {
		t.Fatalf("file rewritten inside MinInterval:\n%s", b2)
	}
}

// A restarted controller finds its topology in place and does not
// reconfigure.
func TestController_RestartKeeps(t *testing.T) {
	cs := fake.NewSimpleClientset(node("k1", zone("za")), pod("p1", "k1", ""))
	file := filepath.Join(t.TempDir(), "topology.conf")
	for i, want := range []int32{1, 0} {
		var logs syncBuf
		rc := &countRC{}
		c := New(Config{PodNamespace: "ns", ConfigMapNamespace: "ns", ConfigMapName: "topo", File: file}, cs, rc, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		waitFor(t, "watching", func() bool { return strings.Contains(logs.String(), "watching") })
		if want == 1 {
			waitFor(t, "first reconfigure", func() bool { return rc.n.Load() == 1 })
		} else {
			waitFor(t, "the first sync", func() bool { return strings.Contains(logs.String(), "topology unchanged") })
		}
		cancel()
		<-done
		if n := rc.n.Load(); n != want {
			t.Fatalf("run %d: %d reconfigures, want %d\n%s", i, n, want, logs.String())
		}
	}
}

func TestPlace(t *testing.T) {
	pods := []corev1.Pod{*pod("p1", "k1", "n1"), *pod("p2", "k2", "")}
	nodes := []corev1.Node{*node("k1", zone("za")), *node("k2", zone("zb"))}
	got := Place([]string{"n1", "k2", "n9"}, pods, nodes, "topology.kubernetes.io/zone")
	want := []Placed{{"n1", "ns/p1", "k1", "za"}, {"k2", "ns/p2", "k2", "zb"}, {"n9", "-", "-", "-"}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if z := Zones(got); len(z) != 3 || z["za"][0] != "n1" {
		t.Fatalf("%v", z)
	}
}

// An edit of the written topology by someone else is reported as drift
// and overwritten with the labels' topology.
func TestController_Drift(t *testing.T) {
	cs := fake.NewSimpleClientset(node("k1", zone("za")), pod("p1", "k1", "n1"))
	file := filepath.Join(t.TempDir(), "topology.conf")
	var logs syncBuf
	rc := &countRC{}
	c := New(Config{PodNamespace: "ns", File: file, MinInterval: time.Millisecond, DriftPeriod: 20 * time.Millisecond}, cs, rc,
		hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "first reconfigure", func() bool { return rc.n.Load() == 1 })
	good, _ := os.ReadFile(file)
	if err := os.WriteFile(file, []byte("SwitchName=edited Nodes=n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drift reported and repaired", func() bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(logs.String(), "topology drift") && string(b) == string(good) && rc.n.Load() == 2
	})
	if !strings.Contains(logs.String(), file) {
		t.Fatalf("the drift log does not name the file:\n%s", logs.String())
	}
}
