package proc

import (
	"fmt"
	"strings"
)

// RlimitInfo names a resource limit as slurm.conf and SLURM_RLIMIT_* do.
type RlimitInfo struct {
	Name     string // "CPU", "FSIZE", ...
	Resource int    // RLIMIT_* number
}

// ParsePropagate returns, per RlimitTable name, whether the limit is
// propagated from the submit host, from slurm.conf's
// PropagateResourceLimits and PropagateResourceLimitsExcept
// (read_config.c, slurm_rlimits_info.c parse_rlimits): Except wins when
// set; the default is ALL. Names may carry an RLIMIT_ prefix.
func ParsePropagate(propagate, except string) (map[string]bool, error) {
	if except != "" {
		return parseRlimits(except, false)
	}
	if propagate == "" {
		propagate = "ALL"
	}
	return parseRlimits(propagate, true)
}

func parseRlimits(s string, flag bool) (map[string]bool, error) {
	out := make(map[string]bool, len(RlimitTable))
	switch s {
	case "NONE":
		for _, r := range RlimitTable {
			out[r.Name] = !flag
		}
		return out, nil
	case "ALL":
		for _, r := range RlimitTable {
			out[r.Name] = flag
		}
		return out, nil
	}
	for _, r := range RlimitTable {
		out[r.Name] = !flag
	}
	for _, tok := range strings.FieldsFunc(s, func(c rune) bool { return strings.ContainsRune(", \t\n", c) }) {
		name := strings.TrimPrefix(tok, "RLIMIT_")
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("proc: bad rlimit name %q", tok)
		}
		out[name] = flag
	}
	return out, nil
}
