package auth

import (
	"context"
	"errors"
)

// UIDAny is SLURM_AUTH_UID_ANY: a credential anyone may decode.
const UIDAny uint32 = 0xffffffff

// Auth plugin ids (slurm.h AUTH_PLUGIN_*), as they go on the wire.
const (
	PluginMunge uint32 = 101 // auth/munge
	PluginSlurm uint32 = 103 // auth/slurm (24.11+)
)

// Credential is a verified auth credential.
type Credential struct {
	UID, GID uint32 // of the process that encoded the credential
	Payload  []byte // for RPCs: the body hash (see Payload/CheckPayload)
	// Replayed is set when the credential had been decoded before and the
	// Authenticator was configured to accept that (MULTIPLE_SLURMD).
	Replayed bool
}

// Authenticator encodes and decodes Slurm auth credentials.
//
// Implementations are safe for concurrent use from any goroutine. Both
// methods block (the munge implementation talks to munged over a unix
// socket), so callers run them off the event loop.
type Authenticator interface {
	// PluginID is the auth plugin id the credentials go on the wire with
	// (the auth block's first u32): PluginMunge or PluginSlurm.
	PluginID() uint32
	// Encode returns a credential string ("MUNGE:...:", no trailing NUL)
	// carrying payload that only restrictUID may decode (UIDAny: anyone).
	Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error)
	// Decode verifies cred. On error the Credential is zero and the error
	// wraps one of the sentinels below.
	Decode(ctx context.Context, cred string) (Credential, error)
}

// Sentinels. Implementations wrap them with %w and add the detail (munge's
// own message) so errors.Is works and logs stay useful.
var (
	ErrExpired       = errors.New("auth: credential expired")
	ErrRewound       = errors.New("auth: credential rewound (encoded in the future; check clocks)")
	ErrReplayed      = errors.New("auth: credential replayed")
	ErrUIDRestricted = errors.New("auth: credential restricted to another uid")
	ErrInvalid       = errors.New("auth: invalid credential")
	ErrUnavailable   = errors.New("auth: authentication service unavailable")
	ErrHashMismatch  = errors.New("auth: message hash mismatch")
	ErrHashMissing   = errors.New("auth: message hash missing")
)

// Refinements of ErrInvalid for authenticators that can tell these
// failures apart (auth/slurm's JWTs): errors.Is(err, ErrInvalid) holds for
// each, so RC and callers that only know ErrInvalid are unchanged.
var (
	ErrBadSignature error = &refinedError{"auth: credential signature invalid", ErrInvalid}
	ErrMalformed    error = &refinedError{"auth: credential malformed", ErrInvalid}
	ErrWrongContext error = &refinedError{"auth: credential made for another purpose (context)", ErrInvalid}
	ErrWrongCluster error = &refinedError{"auth: credential made for another cluster", ErrInvalid}
)

// refinedError is a sentinel that unwraps to a broader one.
type refinedError struct {
	msg    string
	parent error
}

func (e *refinedError) Error() string { return e.msg }
func (e *refinedError) Unwrap() error { return e.parent }

// Slurm return codes used by RC (slurm/slurm_errno.h, 22.05).
const (
	RCSuccess             uint32 = 0
	RCAuthenticationError uint32 = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	RCIncompletePacket    uint32 = 5003 // ESLURM_PROTOCOL_INCOMPLETE_PACKET
	// RCAuthCredInvalid (ESLURM_AUTH_CRED_INVALID) is the errno auth/munge
	// sets on any munge failure; slurmd only logs it, it never reaches the
	// wire from the RPC path.
	RCAuthCredInvalid uint32 = 6000
)

// RC maps an error from this package (or an Authenticator) to the Slurm
// return code the stock 22.05 slurmd uses for the same failure.
//
// Decode failures of every kind (expired, rewound, replayed, uid, garbage,
// munged down) give 1007: slurm_receive_msg_and_forward turns any
// auth_g_verify failure into SLURM_PROTOCOL_AUTHENTICATION_ERROR without
// looking at the munge error. Note that stock slurmd then sends NO reply
// (auth_uid_set is still false in _service_connection): it logs and
// closes. The daemon should do the same; the code is for the log line.
//
// Hash failures give 5003: _check_hash runs after the uid is known and its
// failure is folded into ESLURM_PROTOCOL_INCOMPLETE_PACKET, which slurmd
// does answer with RESPONSE_SLURM_RC.
//
// Any other non-nil error also gives 1007: it came from the auth layer, and
// on the send side slurm_send_node_msg reports a failed auth_g_create as
// SLURM_PROTOCOL_AUTHENTICATION_ERROR too.
func RC(err error) uint32 {
	switch {
	case err == nil:
		return RCSuccess
	case errors.Is(err, ErrHashMismatch), errors.Is(err, ErrHashMissing):
		return RCIncompletePacket
	default:
		return RCAuthenticationError
	}
}
