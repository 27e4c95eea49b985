package slurmproto

import "strings"

// Node state of a node record (slurm.h, the same in 22.05, 24.11 and
// 26.05): a base state in the low four bits and flags above.
const (
	NodeStateBase       uint32 = 0x0f
	NodeStateCompleting uint32 = 1 << 10
	NodeStateNoRespond  uint32 = 1 << 11
	NodeStatePoweredOff uint32 = 1 << 12
	NodeStateFail       uint32 = 1 << 13
	NodeStateMaint      uint32 = 1 << 15
)

var nodeBaseNames = []string{"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"}

// NodeBaseName is the base state's name ("IDLE"), "UNKNOWN" past the table.
func NodeBaseName(state uint32) string {
	if b := state & NodeStateBase; int(b) < len(nodeBaseNames) {
		return nodeBaseNames[b]
	}
	return "UNKNOWN"
}

// NodeStateName is the state as base+FLAG... ("IDLE+DRAIN+COMPLETING"),
// the flags a node daemon's users look at.
func NodeStateName(state uint32) string {
	parts := []string{NodeBaseName(state)}
	for _, f := range []struct {
		bit  uint32
		name string
	}{
		{NodeStateDrain, "DRAIN"}, {NodeStateCompleting, "COMPLETING"}, {NodeStateNoRespond, "NOT_RESPONDING"},
		{NodeStatePoweredOff, "POWERED_DOWN"}, {NodeStateFail, "FAIL"}, {NodeStateMaint, "MAINT"},
	} {
		if state&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, "+")
}
