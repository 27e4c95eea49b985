package slurmconf

import "testing"

func TestDebugFlags(t *testing.T) {
	// The REQUEST_SET_DEBUG_FLAGS goldens: -Gres is bit 6, +Steps bit 1.
	for _, v := range []uint16{V2411, V2605} {
		if DebugFlagBits(v, "Gres") != 1<<6 || DebugFlagBits(v, "Steps") != 1<<1 {
			t.Errorf("%s: Gres %#x Steps %#x", Release(v), DebugFlagBits(v, "Gres"), DebugFlagBits(v, "Steps"))
		}
	}
	for _, v := range []uint16{V2411, V2605} {
		if got := DebugFlagBits(v, "steps, Protocol,NoSuchFlag"); got != 1<<1|1<<26 {
			t.Errorf("%s: bits %#x", Release(v), got)
		}
		if got := DebugFlagString(v, 1<<26|1<<1|1<<50); got != "Accrue,Protocol,Steps" {
			t.Errorf("%s: %q", Release(v), got)
		}
		if got := DebugFlagString(v, 0); got != "" {
			t.Errorf("%s: none is %q", Release(v), got)
		}
	}
	// Bit 15: FrontEnd in 24.11, AuditTLS in 26.05.
	if a, b := DebugFlagString(V2411, 1<<15), DebugFlagString(V2605, 1<<15); a != "FrontEnd" || b != "AuditTLS" {
		t.Errorf("bit 15: %q / %q", a, b)
	}
}
