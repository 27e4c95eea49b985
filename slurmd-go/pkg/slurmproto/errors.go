package slurmproto

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every decode failure wraps one of them with %w so callers
// can map it to a Slurm return code (usually SLURM_PROTOCOL_VERSION_ERROR or
// ESLURM_PROTOCOL_INCOMPLETE_PACKET) with errors.Is.
var (
	// ErrShortBuffer: a field runs past the end of the input.
	ErrShortBuffer = errors.New("slurmproto: short buffer")
	// ErrTooLarge: a length or count is larger than the protocol allows or
	// than the remaining input could possibly hold.
	ErrTooLarge = errors.New("slurmproto: length too large")
	// ErrMalformed: the bytes are present but not a valid encoding
	// (bad bitmap hex, body_length mismatch, trailing bytes, ...).
	ErrMalformed = errors.New("slurmproto: malformed data")
	// ErrUnsupportedVersion: a protocol version that is no known release.
	ErrUnsupportedVersion = errors.New("slurmproto: unsupported protocol version")
	// ErrUnknownMsgType: no body codec is registered for the type in any
	// release.
	ErrUnknownMsgType = errors.New("slurmproto: unknown message type")
	// ErrNoLayout: the type has layouts, but none for this release. It
	// wraps ErrUnsupportedVersion: the answer is SLURM_PROTOCOL_VERSION_ERROR.
	ErrNoLayout = fmt.Errorf("%w: no layout in this release", ErrUnsupportedVersion)
)

// ctxError adds context to an error from this package without repeating
// the "slurmproto: " prefix: "slurmproto: header: short buffer: ...".
type ctxError struct {
	ctx string
	err error
}

func (e *ctxError) Error() string {
	return "slurmproto: " + e.ctx + ": " + strings.TrimPrefix(e.err.Error(), "slurmproto: ")
}

func (e *ctxError) Unwrap() error { return e.err }

// wrap returns err with context ctx (nil stays nil).
func wrap(ctx string, err error) error {
	if err == nil {
		return nil
	}
	return &ctxError{ctx: ctx, err: err}
}
