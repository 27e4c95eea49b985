package rpc

import (
	"errors"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// SlurmError carries a Slurm return code through %w chains, so handlers and
// the packages below them return Go errors and the edge picks the code.
type SlurmError struct {
	RC  uint32
	Err error
}

func (e *SlurmError) Error() string {
	if e.Err == nil {
		return slurmproto.RCName(e.RC)
	}
	return slurmproto.RCName(e.RC) + ": " + e.Err.Error()
}

func (e *SlurmError) Unwrap() error { return e.Err }

// Errorf wraps err with a Slurm return code.
func WithRC(rc uint32, err error) error { return &SlurmError{RC: rc, Err: err} }

// ErrorToRC maps an error to the return code put on the wire: the first
// SlurmError in the chain, else SLURM_ERROR (-1 as uint32), as slurmd
// does for failures it has no code for.
func ErrorToRC(err error) uint32 {
	if err == nil {
		return 0
	}
	var se *SlurmError
	if errors.As(err, &se) {
		return se.RC
	}
	return SlurmErrorRC
}

// SlurmErrorRC is SLURM_ERROR (-1) on the wire.
const SlurmErrorRC = ^uint32(0)
