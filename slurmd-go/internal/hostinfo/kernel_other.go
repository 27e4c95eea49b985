//go:build !linux

package hostinfo

import "fmt"

func probeKernel(info *Info, tmpFS string) error {
	return fmt.Errorf("%w: only Linux is supported", ErrProbe)
}

// ProbeLoad is Linux-only.
func ProbeLoad() (Load, error) {
	return Load{}, fmt.Errorf("%w: only Linux is supported", ErrProbe)
}
