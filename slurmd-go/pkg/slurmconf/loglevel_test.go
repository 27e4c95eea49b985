package slurmconf

import "testing"

// TestLogLevelString: log_num2string's names, "(null)" for a channel not
// set, and every name reads back as its level (log_string2num).
func TestLogLevelString(t *testing.T) {
	for l, want := range map[LogLevel]string{LogQuiet: "quiet", LogError: "error", LogDebug2: "debug2", LogDebug5: "debug5", LogEnd: "(null)", LogEnd + 1: "unknown"} {
		if got := l.String(); got != want {
			t.Errorf("LogLevel(%d) = %q, want %q", l, got, want)
		}
	}
	for l := LogQuiet; l < LogEnd; l++ {
		if got, ok := logLevel(l.String()); !ok || got != l {
			t.Errorf("logLevel(%q) = %d, %v; want %d", l.String(), got, ok, l)
		}
	}
}
