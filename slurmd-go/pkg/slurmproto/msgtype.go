package slurmproto

import "strconv"

//go:generate python3 internal/genenums/genenums.py $SLURM_SRC .
//go:generate gofmt -w msgtype_table.go rc_table.go

// MsgType is a Slurm message type (slurm_msg_type_t). The constants live in
// msgtype_table.go, generated from Slurm 22.05.8 slurm_protocol_defs.h.
type MsgType uint16

// String returns Slurm's name ("REQUEST_PING"), or the number for types
// Slurm 22.05 does not define.
func (t MsgType) String() string {
	if s, ok := msgTypeNames[t]; ok {
		return s
	}
	return "MsgType(" + strconv.Itoa(int(t)) + ")"
}

// Known reports whether t is a message type defined by Slurm 22.05.
func (t MsgType) Known() bool {
	_, ok := msgTypeNames[t]
	return ok
}

// namesIn is the name table of the release whose layouts version v uses:
// the newest spoken release at or below v (20.11 and 21.08 read as 22.05,
// the 23.x and 25.x header-only versions as the release before them).
func namesIn[K comparable](tables map[uint16]map[K]string, v uint16) map[K]string {
	s, ok := SpokenAtMost(v)
	if !ok {
		s = Version2205
	}
	return tables[s]
}

// NameIn is t's name in the release of protocol version v, or its number.
func (t MsgType) NameIn(v uint16) string {
	if s, ok := namesIn(msgTypeNamesByVersion, v)[t]; ok {
		return s
	}
	return "MsgType(" + strconv.Itoa(int(t)) + ")"
}

// KnownIn reports whether the release of protocol version v defines t.
func (t MsgType) KnownIn(v uint16) bool {
	_, ok := namesIn(msgTypeNamesByVersion, v)[t]
	return ok
}
