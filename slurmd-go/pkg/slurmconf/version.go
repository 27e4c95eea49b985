package slurmconf

import "fmt"

// Slurm protocol versions of the releases slurmconf reads files for
// (SLURM_PROTOCOL_VERSION in src/common/slurm_protocol_common.h).
const (
	// Lenient accepts the union of every release's keys; see doc.go.
	Lenient uint16 = 0
	V2205   uint16 = 0x2600 // Slurm 22.05
	V2411   uint16 = 0x2A00 // Slurm 24.11
	V2605   uint16 = 0x2D00 // Slurm 26.05
)

// Versions lists the releases in protocol order.
var Versions = []uint16{V2205, V2411, V2605}

// Options select how a file is read.
type Options struct {
	// Version is the protocol version of the Slurm release whose slurmd is
	// imitated: V2205, V2411 or V2605; Lenient (0) accepts what any of
	// them accepts. Load and Parse without Options read as V2205.
	Version uint16
}

// Release names a protocol version ("24.11"), or "lenient".
func Release(v uint16) string {
	switch v {
	case Lenient:
		return "lenient"
	case V2205:
		return "22.05"
	case V2411:
		return "24.11"
	case V2605:
		return "26.05"
	}
	return fmt.Sprintf("0x%04x", v)
}

// release is the behaviour switchboard of one read. Strict reads follow one
// release; a lenient read takes the newest release's value rules and
// defaults but applies only the checks every release makes.
type release struct {
	v uint16 // Lenient or one of Versions
}

func newRelease(opts []Options) (release, error) {
	switch len(opts) {
	case 0:
		return release{V2205}, nil
	case 1:
	default:
		return release{}, fmt.Errorf("slurmconf: %w: %d Options given, at most one is allowed", ErrVersion, len(opts))
	}
	v := opts[0].Version
	switch v {
	case Lenient, V2205, V2411, V2605:
		return release{v}, nil
	}
	return release{}, fmt.Errorf("slurmconf: %w: protocol version 0x%04x is none of 0x%04x (22.05), 0x%04x (24.11), 0x%04x (26.05)",
		ErrVersion, v, V2205, V2411, V2605)
}

func (r release) lenient() bool { return r.v == Lenient }

// atLeast reports whether value rules and defaults of release v apply
// (a lenient read uses the newest release's).
func (r release) atLeast(v uint16) bool { return r.lenient() || r.v >= v }

// check reports whether a validation rule made by releases [from, until)
// (until 0: still made by the newest) applies. A lenient read applies only
// the rules every release makes.
func (r release) check(from, until uint16) bool {
	if r.lenient() {
		return from <= V2205 && until == 0
	}
	return r.v >= from && (until == 0 || r.v < until)
}
