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
