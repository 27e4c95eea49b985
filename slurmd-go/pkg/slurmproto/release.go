package slurmproto

import "fmt"

// Releases. A controller talks to a node in the version the node registered
// with, and to a node it has not heard from yet in its own oldest supported
// version (22.05: 0x2400, 24.11: 0x2700, 25.05: 0x2800, 25.11: 0x2900,
// 26.05: 0x2A00). So this package knows two kinds of release:
//
//   - spoken releases (22.05, 24.11, 26.05): every message a node daemon
//     sends or accepts has a layout registered for exactly that version;
//   - header-only releases (20.11 ... 25.11): the header decodes, and only
//     the bodies a controller sends to an unknown node (the empty
//     registration request, pings) and the return-code replies are
//     registered for them. Anything else at such a version has no layout
//     and is refused with ErrNoLayout.
//
// Nothing is ever decoded with another release's layout: a body codec is
// registered for an explicit list of versions (see RegisterBody).

// spokenVersions are the releases the node daemon can register as, newest
// first (the order the daemon tries them in).
var spokenVersions = []uint16{Version2605, Version2411, Version2205}

// headerVersions are all releases whose header layout DecodeHeader knows.
var headerVersions = []uint16{
	Version2011, Version2108, Version2205, Version2302, Version2311,
	Version2405, Version2411, Version2505, Version2511, Version2605,
}

// Spoken returns the releases a node daemon can speak, newest first.
func Spoken() []uint16 { return append([]uint16(nil), spokenVersions...) }

// Speaks reports whether v is a release this package speaks in full.
func Speaks(v uint16) bool { return in(spokenVersions, v) }

// ValidVersion reports whether v is the protocol version of a release whose
// header this package decodes (exact releases only, as Slurm's own
// check_header_version/unpack_header).
func ValidVersion(v uint16) bool { return in(headerVersions, v) }

// SpokenAtMost returns the newest spoken release not newer than v, and
// false if there is none. A node whose controller answered in version v
// (newer than the node's first try, or older) registers with it.
func SpokenAtMost(v uint16) (uint16, bool) {
	for _, s := range spokenVersions {
		if s <= v {
			return s, true
		}
	}
	return 0, false
}

// ReleaseName is the release of protocol version v ("24.11"), or its hex
// value for versions that are no release.
func ReleaseName(v uint16) string {
	switch v {
	case Version2011:
		return "20.11"
	case Version2108:
		return "21.08"
	case Version2205:
		return "22.05"
	case Version2302:
		return "23.02"
	case Version2311:
		return "23.11"
	case Version2405:
		return "24.05"
	case Version2411:
		return "24.11"
	case Version2505:
		return "25.05"
	case Version2511:
		return "25.11"
	case Version2605:
		return "26.05"
	}
	return fmt.Sprintf("0x%04x", v)
}

// ParseRelease maps "24.11" (or "0x2a00") to its protocol version.
func ParseRelease(s string) (uint16, error) {
	for _, v := range headerVersions {
		if s == ReleaseName(v) || s == fmt.Sprintf("0x%04x", v) || s == fmt.Sprintf("0x%04X", v) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown Slurm release %q", ErrUnsupportedVersion, s)
}

func in(vs []uint16, v uint16) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// Version sets for body registrations.
var (
	// only2205 / only2411 / only2605: one spoken release.
	only2205 = []uint16{Version2205}
	only2411 = []uint16{Version2411}
	only2605 = []uint16{Version2605}
	// spoken: the three spoken releases (layouts that differ between them
	// branch on the version inside one codec, as Slurm's own packers do).
	spoken = []uint16{Version2205, Version2411, Version2605}
	// pre2205: the 20.11 and 21.08 layouts a 22.05 controller still sends.
	pre2205 = []uint16{Version2011, Version2108}
	// upTo2205 is pre2205 plus 22.05.
	upTo2205 = []uint16{Version2011, Version2108, Version2205}
	// legacyAndSpoken: 20.11, 21.08 and the spoken releases.
	legacyAndSpoken = []uint16{Version2011, Version2108, Version2205, Version2411, Version2605}
	// everyHeader: bodies that are the same in every release (empty
	// bodies, return codes), needed at the header-only versions too.
	everyHeader = headerVersions
)

// releaseVersions are the Slurm versions a node daemon reports (registration,
// scontrol show slurmd, SPANK's S_SLURM_VERSION) when it speaks each release:
// those of the stock daemons it is tested against.
var releaseVersions = map[uint16]string{
	Version2205: "22.05.8",
	Version2411: "24.11.5",
	Version2605: "26.05.5",
}

// ReleaseVersion is the Slurm version reported when speaking protocol v
// (22.05's for a version that is not spoken).
func ReleaseVersion(v uint16) string {
	if s, ok := releaseVersions[v]; ok {
		return s
	}
	return releaseVersions[Version2205]
}
