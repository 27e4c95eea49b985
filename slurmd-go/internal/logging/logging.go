// Package logging builds the daemon's go-hclog loggers: one root logger per
// process, handed to every constructor and narrowed with Named.
package logging

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
)

// Options select where and how verbosely the daemon logs.
type Options struct {
	// File is SlurmdLogFile or -L; empty logs to stderr.
	File string
	// Level is SlurmdDebug from slurm.conf as Slurm's level number
	// (quiet 0, fatal 1, error 2, info 3, verbose 4, debug 5, debug2 6 ...).
	Level int
	// Verbose is the number of -v flags; each one raises the level a step, as in slurmd.
	Verbose int
}

// New returns the root logger and the file it writes to (nil for stderr), which
// the caller closes on exit and reopens on SIGHUP.
func New(name string, o Options) (hclog.Logger, io.Closer, error) {
	var out io.Writer = os.Stderr
	var closer io.Closer
	if o.File != "" {
		if err := os.MkdirAll(filepath.Dir(o.File), 0o755); err != nil {
			return nil, nil, fmt.Errorf("logging: log dir: %w", err)
		}
		f, err := os.OpenFile(o.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return nil, nil, fmt.Errorf("logging: open %s: %w", o.File, err)
		}
		out, closer = f, f
	}
	lvl := Level(o.Level, o.Verbose)
	l := hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      lvl,
		Output:     out,
		TimeFormat: "2006-01-02T15:04:05.000",
	})
	return l, closer, nil
}

// Level maps Slurm's debug level number plus -v counts onto hclog levels.
// Slurm has more steps than hclog: quiet..error → Error, info → Info,
// verbose and debug → Debug, debug2 and above → Trace.
func Level(level, verbose int) hclog.Level {
	n := level + verbose
	switch {
	case n <= 2:
		return hclog.Error
	case n == 3:
		return hclog.Info
	case n <= 5:
		return hclog.Debug
	default:
		return hclog.Trace
	}
}
