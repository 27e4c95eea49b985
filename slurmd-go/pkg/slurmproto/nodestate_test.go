package slurmproto

import "testing"

func TestNodeStateName(t *testing.T) {
	for state, want := range map[uint32]string{
		2:                  "IDLE",
		3 | NodeStateDrain: "ALLOCATED+DRAIN",
		5 | NodeStateCompleting | NodeStateNoRespond: "MIXED+COMPLETING+NOT_RESPONDING",
		1 | NodeStateFail: "DOWN+FAIL",
		0x0e:              "UNKNOWN",
	} {
		if got := NodeStateName(state); got != want {
			t.Errorf("%#x: %q, want %q", state, got, want)
		}
	}
}
