//go:build !linux

package cgroup

// New returns None: cgroups exist only on Linux.
func New(Options) (Manager, error) { return None{}, nil }

// NewDevices fails: device confinement needs Linux cgroups.
func NewDevices(Options) (DeviceManager, error) { return nil, ErrNotSupported }
