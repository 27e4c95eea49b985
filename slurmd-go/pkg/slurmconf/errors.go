package slurmconf

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by every *ParseError; test with errors.Is.
var (
	// ErrSyntax: a line that is not key=value, or text left over after it.
	ErrSyntax = errors.New("slurmconf: syntax error")
	// ErrUnknownKey: a key the release does not know.
	ErrUnknownKey = errors.New("slurmconf: unknown key")
	// ErrValue: a value of the wrong type or out of range.
	ErrValue = errors.New("slurmconf: invalid value")
	// ErrInclude: an Include that cannot be read.
	ErrInclude = errors.New("slurmconf: include failed")
	// ErrInvalid: the file parses but slurmd would reject the
	// configuration (no ClusterName, unknown SlurmUser, NodeAddr count,
	// an option the release removed...).
	ErrInvalid = errors.New("slurmconf: invalid configuration")
	// ErrVersion: Options name no release slurmconf knows (not wrapped in
	// a *ParseError).
	ErrVersion = errors.New("slurmconf: unsupported Slurm release")
)

// The fatal lines slurmd prints after an error line about a file.
const (
	fatalSlurmConf = "Unable to process configuration file"
	fatalCgroupFmt = "Could not open/read/parse cgroup.conf file %s"
	fatalMPIFmt    = "Could not open/read/parse mpi.conf file %s. Many times this is because you have defined options for plugins that are not loaded. Please check your slurm.conf file and make sure the plugins for the options listed are loaded."
)

// ParseError locates an error. Line is the first physical line of the
// (possibly continued) line, 1-based; 0 when the error is about the whole
// file (a missing ClusterName).
//
// Msg is the text the imitated release's slurmd logs for the cause (its
// first line about it); Fatal is the fatal line it logs next and exits on,
// or "" when Msg is itself that fatal line. Lines gives both as slurmd
// prints them.
type ParseError struct {
	File  string
	Line  int
	Msg   string
	Fatal string
	Err   error // one of the sentinels above
}

func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Lines returns what slurmd logs for the error, level first:
// ["error: <Msg>", "fatal: <Fatal>"], or ["fatal: <Msg>"].
func (e *ParseError) Lines() []string {
	if e.Fatal == "" {
		return []string{"fatal: " + e.Msg}
	}
	return []string{"error: " + e.Msg, "fatal: " + e.Fatal}
}

// perr makes an error-level ParseError that slurmd follows with "Unable to
// process configuration file".
func perr(file string, line int, sentinel error, format string, args ...any) *ParseError {
	return &ParseError{File: file, Line: line, Msg: fmt.Sprintf(format, args...), Fatal: fatalSlurmConf, Err: sentinel}
}

// pfatal makes a ParseError whose message slurmd logs with fatal().
func pfatal(file string, line int, sentinel error, format string, args ...any) *ParseError {
	return &ParseError{File: file, Line: line, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// Warning is a problem slurmd logs and then carries on: a defunct key, a
// value it resets, a key given twice.
type Warning struct {
	File  string
	Line  int    // 0: about the whole file
	Level string // "error", "warning", "info" or "debug", the log call slurmd uses
	Msg   string
}

// Text is the line as slurmd logs it ("error: <Msg>"; info lines bare).
func (w Warning) Text() string {
	if w.Level == "info" {
		return w.Msg
	}
	return w.Level + ": " + w.Msg
}

// String is Text located: "file:line: error: <Msg>".
func (w Warning) String() string {
	if w.Line <= 0 {
		return fmt.Sprintf("%s: %s", w.File, w.Text())
	}
	return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Text())
}
