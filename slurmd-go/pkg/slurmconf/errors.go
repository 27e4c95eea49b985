package slurmconf

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by every *ParseError; test with errors.Is.
var (
	// ErrSyntax: a line that is not key=value, or text left over after it.
	ErrSyntax = errors.New("slurmconf: syntax error")
	// ErrUnknownKey: a key slurmctld 22.05 does not know.
	ErrUnknownKey = errors.New("slurmconf: unknown key")
	// ErrValue: a value of the wrong type or out of range.
	ErrValue = errors.New("slurmconf: invalid value")
	// ErrInclude: an Include that cannot be read.
	ErrInclude = errors.New("slurmconf: include failed")
	// ErrInvalid: the file parses but slurmctld would reject the
	// configuration (no ClusterName, unknown SlurmUser, NodeAddr count...).
	ErrInvalid = errors.New("slurmconf: invalid configuration")
)

// ParseError locates an error. Line is the first physical line of the
// (possibly continued) line, 1-based; 0 when the error is about the whole
// file (a missing ClusterName).
type ParseError struct {
	File string
	Line int
	Msg  string
	Err  error // one of the sentinels above
}

func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

func (e *ParseError) Unwrap() error { return e.Err }

func perr(file string, line int, sentinel error, format string, args ...any) *ParseError {
	return &ParseError{File: file, Line: line, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}
