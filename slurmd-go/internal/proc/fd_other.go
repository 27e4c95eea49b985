//go:build !linux

package proc

// CloseInherited is a no-op where /proc is not Linux's.
func CloseInherited(from int) error { return nil }

// CloseOnExecFrom is a no-op where close_range is not Linux's.
func CloseOnExecFrom(from int) error { return nil }
