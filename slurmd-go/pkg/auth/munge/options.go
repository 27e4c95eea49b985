package munge

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// DefaultSocket is munged's default socket (AuthInfo socket= overrides it).
const DefaultSocket = "/run/munge/munge.socket.2"

// Retry policy for EMUNGE_SOCKET, after Slurm's auth/munge (RETRY_COUNT 20,
// RETRY_USEC 100000): a busy munged (default 2 threads) refuses
// connections, and a short pause usually clears it.
const (
	socketRetries    = 20
	socketRetryPause = 100 * time.Millisecond
)

// DefaultMaxInFlight bounds concurrent munged transactions per Munge: munged
// serves only a few threads and its listen queue is finite, so queueing in
// Go (where ctx is honoured) is cheaper than a refused connection.
const DefaultMaxInFlight = 64

// Options configure a Munge. The zero value talks to the default socket.
type Options struct {
	// Socket is munged's unix socket (AuthInfo socket=); "" means
	// DefaultSocket.
	Socket string
	// TTL is the credential lifetime in seconds set on Encode (AuthInfo
	// ttl=); 0 means munged's default (300 s), -1 munged's maximum.
	TTL int
	// AllowReplay accepts a credential munged reports as replayed and
	// returns it with Replayed=true. Debian builds Slurm with
	// MULTIPLE_SLURMD, where several slurmds on one host share one munged
	// and forwarded messages reuse the originator's credential, so the
	// second node to decode it always sees EMUNGE_CRED_REPLAYED.
	AllowReplay bool
	// MaxInFlight bounds concurrent munged transactions; 0 means
	// DefaultMaxInFlight.
	MaxInFlight int
	// Logger gets the EMUNGE_SOCKET retries (debug) and give-ups (error);
	// nil means none. Decode outcomes are the caller's to log.
	Logger hclog.Logger
}

// normalize validates o and fills in the defaults.
func (o Options) normalize() (Options, error) {
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if strings.IndexByte(o.Socket, 0) >= 0 {
		return o, fmt.Errorf("munge: socket path %q contains NUL", o.Socket)
	}
	if o.TTL < -1 {
		return o, fmt.Errorf("munge: ttl %d: want -1 (maximum), 0 (default) or seconds", o.TTL)
	}
	if o.MaxInFlight < 0 {
		return o, fmt.Errorf("munge: max in flight %d < 0", o.MaxInFlight)
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return o, nil
}

// Error is a failed munge operation. It unwraps to the auth sentinel, so
// callers test errors.Is(err, auth.ErrExpired) etc.; Code is munge_err_t
// for logs and tests.
type Error struct {
	Op   string // "encode" or "decode"
	Code int    // munge_err_t (EMUNGE_*)
	Msg  string // munge_ctx_strerror, plus encode/decode times if known
	Err  error  // auth sentinel
}

func (e *Error) Error() string {
	return fmt.Sprintf("munge: %s: %s (%s)", e.Op, e.Msg, codeName(e.Code))
}

func (e *Error) Unwrap() error { return e.Err }

// munge_err_t values (munge.h); munged sends them as one byte.
const (
	eSuccess          = 0
	eSnafu            = 1
	eBadArg           = 2
	eBadLength        = 3
	eOverflow         = 4
	eNoMemory         = 5
	eSocket           = 6
	eTimeout          = 7
	eBadCred          = 8
	eBadVersion       = 9
	eBadCipher        = 10
	eBadMAC           = 11
	eBadZip           = 12
	eBadRealm         = 13
	eCredInvalid      = 14
	eCredExpired      = 15
	eCredRewound      = 16
	eCredReplayed     = 17
	eCredUnauthorized = 18
)

var codeNames = map[int]string{
	eSuccess: "EMUNGE_SUCCESS", eSnafu: "EMUNGE_SNAFU", eBadArg: "EMUNGE_BAD_ARG",
	eBadLength: "EMUNGE_BAD_LENGTH", eOverflow: "EMUNGE_OVERFLOW", eNoMemory: "EMUNGE_NO_MEMORY",
	eSocket: "EMUNGE_SOCKET", eTimeout: "EMUNGE_TIMEOUT", eBadCred: "EMUNGE_BAD_CRED",
	eBadVersion: "EMUNGE_BAD_VERSION", eBadCipher: "EMUNGE_BAD_CIPHER", eBadMAC: "EMUNGE_BAD_MAC",
	eBadZip: "EMUNGE_BAD_ZIP", eBadRealm: "EMUNGE_BAD_REALM", eCredInvalid: "EMUNGE_CRED_INVALID",
	eCredExpired: "EMUNGE_CRED_EXPIRED", eCredRewound: "EMUNGE_CRED_REWOUND",
	eCredReplayed: "EMUNGE_CRED_REPLAYED", eCredUnauthorized: "EMUNGE_CRED_UNAUTHORIZED",
}

func codeName(code int) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("munge error %d", code)
}

// sentinel maps munge_err_t to the auth sentinel.
func sentinel(code int) error {
	switch code {
	case eCredExpired:
		return auth.ErrExpired
	case eCredRewound:
		return auth.ErrRewound
	case eCredReplayed:
		return auth.ErrReplayed
	case eCredUnauthorized:
		return auth.ErrUIDRestricted
	case eSocket, eTimeout, eSnafu, eNoMemory:
		// munged unreachable, or failing on its side: not the peer's fault.
		return auth.ErrUnavailable
	default:
		// EMUNGE_BAD_CRED/_VERSION/_CIPHER/_MAC/_ZIP/_REALM, _CRED_INVALID
		// (bad MAC or key mismatch), _BAD_ARG/_BAD_LENGTH/_OVERFLOW.
		return auth.ErrInvalid
	}
}
