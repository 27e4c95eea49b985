package daemon

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestK8sDrainReason(t *testing.T) {
	cond := func(typ string, st corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: st}
	}
	types := []string{"Ready", "MemoryPressure", "GPUUnhealthy"}
	healthy := []corev1.NodeCondition{cond("Ready", "True"), cond("MemoryPressure", "False"), cond("SlurmNodeDrained", "True")}
	for _, tc := range []struct {
		name     string
		cordoned bool
		conds    []corev1.NodeCondition
		want     string
	}{
		{"healthy", false, healthy, ""},
		{"cordoned first", true, append(healthy, cond("GPUUnhealthy", "True")), CordonReason},
		{"not ready", false, []corev1.NodeCondition{cond("Ready", "Unknown")}, "k8s: node condition Ready=Unknown"},
		{"pressure", false, []corev1.NodeCondition{cond("Ready", "True"), cond("MemoryPressure", "True")}, "k8s: node condition MemoryPressure=True"},
		{"custom", false, append(healthy, cond("GPUUnhealthy", "True")), "k8s: node condition GPUUnhealthy=True"},
		{"unlisted type", false, []corev1.NodeCondition{cond("DiskPressure", "True")}, ""},
		{"no conditions", false, nil, ""},
	} {
		if got := k8sDrainReason(tc.cordoned, tc.conds, types); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNodeConditions(t *testing.T) {
	c := nodeConditions(&slurmproto.NodeRecord{NodeState: 3 | slurmproto.NodeStateDrain, Reason: "admin"})
	if c[0].Type != DrainCondition || c[0].Status != corev1.ConditionTrue || c[0].Message != "drained in Slurm: admin" {
		t.Fatalf("drain %+v", c[0])
	}
	if c[1].Type != StateCondition || c[1].Reason != "SlurmAllocated" || c[1].Message != "ALLOCATED+DRAIN" {
		t.Fatalf("state %+v", c[1])
	}
	if c := nodeConditions(&slurmproto.NodeRecord{NodeState: 2}); c[0].Status != corev1.ConditionFalse || c[1].Reason != "SlurmIdle" {
		t.Fatalf("%+v", c)
	}
}
