//go:build !linux

package cgroup

// New returns None: cgroups exist only on Linux.
func New(Options) (Manager, error) { return None{}, nil }
