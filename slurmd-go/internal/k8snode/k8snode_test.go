package k8snode

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The watch itself runs against a real API server in k8s/e2e
// (TestChart_Labels); this checks what is delivered.
func TestWatcher_DeliversLabelChangesOnly(t *testing.T) {
	var got []map[string]string
	var cordons []bool
	w := &Watcher{Node: "n1", Log: hclog.NewNullLogger(), OnLabels: func(l map[string]string) { got = append(got, l) },
		OnCordon: func(c bool) { cordons = append(cordons, c) }}
	node := func(zone string, unsched bool) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": zone}}, Spec: corev1.NodeSpec{Unschedulable: unsched}}
	}
	w.deliver(node("a", false))
	w.deliver(node("a", true)) // a cordon is not a label change
	w.deliver(node("b", true))
	w.deliver("not a node")
	if len(got) != 2 || got[0]["zone"] != "a" || got[1]["zone"] != "b" {
		t.Fatalf("delivered %v", got)
	}
	if len(cordons) != 2 || cordons[0] || !cordons[1] {
		t.Fatalf("cordons %v, want false then true", cordons)
	}
	got[1]["zone"] = "changed by the handler"
	w.deliver(node("b", false))
	if len(cordons) != 3 || cordons[2] {
		t.Fatalf("uncordon: %v", cordons)
	}
	if len(got) != 2 {
		t.Fatalf("the handler's copy was the watcher's: %v", got)
	}
}

func TestWatcher_FirstEmptyLabelSetDelivered(t *testing.T) {
	n := 0
	w := &Watcher{Node: "n1", Log: hclog.NewNullLogger(), OnLabels: func(map[string]string) { n++ }}
	w.deliver(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if n != 1 {
		t.Fatalf("%d deliveries", n)
	}
}

// Conditions are delivered when a status or reason changes, not when only
// the kubelet's heartbeat time moves.
func TestWatcher_Conditions(t *testing.T) {
	var got [][]corev1.NodeCondition
	w := &Watcher{Node: "n1", Log: hclog.NewNullLogger(), OnLabels: func(map[string]string) {},
		OnConditions: func(c []corev1.NodeCondition) { got = append(got, c) }}
	node := func(ready corev1.ConditionStatus, beat int64) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Unix(beat, 0)}}}}
	}
	w.deliver(node(corev1.ConditionTrue, 1))
	w.deliver(node(corev1.ConditionTrue, 2))
	w.deliver(node(corev1.ConditionUnknown, 3))
	if len(got) != 2 || got[0][0].Status != corev1.ConditionTrue || got[1][0].Status != corev1.ConditionUnknown {
		t.Fatalf("delivered %v", got)
	}
}
