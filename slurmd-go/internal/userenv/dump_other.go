//go:build !linux

package userenv

import (
	"errors"
	"io"
)

// Step manager subcommands (Linux only).
const (
	CmdGetenv = "getenv"
	CmdSuExec = "su-exec"
)

// Dump is Linux only.
func Dump(io.Writer) error { return errors.New("userenv: Linux only") }

// SuExec is Linux only.
func SuExec([]string) int { return 2 }
