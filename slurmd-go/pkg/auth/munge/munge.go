//go:build cgo

package munge

/*
#cgo LDFLAGS: -lmunge
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <munge.h>

// One cgo crossing per operation: create a context, set the options, run
// the call, keep munge's message, destroy the context. munge_ctx_set/get are
// variadic, which cgo cannot call directly.

typedef struct {
	munge_err_t err;
	char *cred;      // encode: malloc'd by libmunge, freed by Go
	void *buf;       // decode: malloc'd by libmunge (also on some errors)
	int len;
	uid_t uid;
	gid_t gid;
	long long encoded, decoded; // on expired/rewound/replayed
	char msg[256];
} tiee_munge_result;

static void tiee_set_msg(tiee_munge_result *r, munge_ctx_t ctx) {
	const char *m = ctx ? munge_ctx_strerror(ctx) : NULL;
	if (m == NULL)
		m = munge_strerror(r->err);
	snprintf(r->msg, sizeof(r->msg), "%s", m ? m : "unknown munge error");
}

static munge_ctx_t tiee_ctx(const char *sock, tiee_munge_result *r) {
	munge_ctx_t ctx = munge_ctx_create();
	if (ctx == NULL) {
		r->err = EMUNGE_NO_MEMORY;
		tiee_set_msg(r, NULL);
		return NULL;
	}
	if (sock != NULL) {
		r->err = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock);
		if (r->err != EMUNGE_SUCCESS) {
			tiee_set_msg(r, ctx);
			munge_ctx_destroy(ctx);
			return NULL;
		}
	}
	return ctx;
}

static void tiee_encode(const char *sock, const void *payload, int len,
			int restrict_uid, unsigned int uid, int ttl,
			tiee_munge_result *r) {
	munge_ctx_t ctx = tiee_ctx(sock, r);
	if (ctx == NULL)
		return;
	if (restrict_uid)
		r->err = munge_ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, (uid_t) uid);
	if (r->err == EMUNGE_SUCCESS && ttl != 0)
		r->err = munge_ctx_set(ctx, MUNGE_OPT_TTL, ttl);
	if (r->err == EMUNGE_SUCCESS)
		r->err = munge_encode(&r->cred, ctx, payload, len);
	if (r->err != EMUNGE_SUCCESS)
		tiee_set_msg(r, ctx);
	munge_ctx_destroy(ctx);
}

static void tiee_decode(const char *sock, const char *cred,
			tiee_munge_result *r) {
	munge_ctx_t ctx = tiee_ctx(sock, r);
	if (ctx == NULL)
		return;
	r->err = munge_decode(cred, ctx, &r->buf, &r->len, &r->uid, &r->gid);
	if (r->err != EMUNGE_SUCCESS) {
		time_t t;
		tiee_set_msg(r, ctx);
		if (munge_ctx_get(ctx, MUNGE_OPT_ENCODE_TIME, &t) == EMUNGE_SUCCESS)
			r->encoded = (long long) t;
		if (munge_ctx_get(ctx, MUNGE_OPT_DECODE_TIME, &t) == EMUNGE_SUCCESS)
			r->decoded = (long long) t;
	}
	munge_ctx_destroy(ctx);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// Munge is an auth.Authenticator over libmunge. It is safe for concurrent
// use: every call creates its own munge context (contexts are not
// thread-safe) and holds no lock while munged works.
//
// Waiting: libmunge has no cancellation. A call that has started runs to
// completion in its own goroutine; libmunge bounds it (10 connect attempts
// with 50 ms linear back-off, a 2 s timeout per socket read/write, 5
// transaction attempts), and EMUNGE_SOCKET is retried here every 100 ms up
// to 20 times, like Slurm. Encode and Decode return as soon as ctx is done,
// abandoning such a call: its result is freed and discarded, and its
// MaxInFlight slot is held until it really ends. Note that an abandoned
// Decode may still have entered the credential into munged's replay cache.
type Munge struct {
	socket      []byte // NUL-terminated, passed to C on each call
	socketName  string
	ttl         int
	allowReplay bool
	sem         chan struct{} // MaxInFlight slots
	log         hclog.Logger
}

var _ auth.Authenticator = (*Munge)(nil)

// The plain munge_err_t numbers in options.go must be munge.h's: any
// difference makes this sum of squares positive and the uint negative,
// which does not compile.
const _ uint = -((eSuccess-C.EMUNGE_SUCCESS)*(eSuccess-C.EMUNGE_SUCCESS) +
	(eSnafu-C.EMUNGE_SNAFU)*(eSnafu-C.EMUNGE_SNAFU) +
	(eBadArg-C.EMUNGE_BAD_ARG)*(eBadArg-C.EMUNGE_BAD_ARG) +
	(eBadLength-C.EMUNGE_BAD_LENGTH)*(eBadLength-C.EMUNGE_BAD_LENGTH) +
	(eOverflow-C.EMUNGE_OVERFLOW)*(eOverflow-C.EMUNGE_OVERFLOW) +
	(eNoMemory-C.EMUNGE_NO_MEMORY)*(eNoMemory-C.EMUNGE_NO_MEMORY) +
	(eSocket-C.EMUNGE_SOCKET)*(eSocket-C.EMUNGE_SOCKET) +
	(eTimeout-C.EMUNGE_TIMEOUT)*(eTimeout-C.EMUNGE_TIMEOUT) +
	(eBadCred-C.EMUNGE_BAD_CRED)*(eBadCred-C.EMUNGE_BAD_CRED) +
	(eBadVersion-C.EMUNGE_BAD_VERSION)*(eBadVersion-C.EMUNGE_BAD_VERSION) +
	(eBadCipher-C.EMUNGE_BAD_CIPHER)*(eBadCipher-C.EMUNGE_BAD_CIPHER) +
	(eBadMAC-C.EMUNGE_BAD_MAC)*(eBadMAC-C.EMUNGE_BAD_MAC) +
	(eBadZip-C.EMUNGE_BAD_ZIP)*(eBadZip-C.EMUNGE_BAD_ZIP) +
	(eBadRealm-C.EMUNGE_BAD_REALM)*(eBadRealm-C.EMUNGE_BAD_REALM) +
	(eCredInvalid-C.EMUNGE_CRED_INVALID)*(eCredInvalid-C.EMUNGE_CRED_INVALID) +
	(eCredExpired-C.EMUNGE_CRED_EXPIRED)*(eCredExpired-C.EMUNGE_CRED_EXPIRED) +
	(eCredRewound-C.EMUNGE_CRED_REWOUND)*(eCredRewound-C.EMUNGE_CRED_REWOUND) +
	(eCredReplayed-C.EMUNGE_CRED_REPLAYED)*(eCredReplayed-C.EMUNGE_CRED_REPLAYED) +
	(eCredUnauthorized-C.EMUNGE_CRED_UNAUTHORIZED)*(eCredUnauthorized-C.EMUNGE_CRED_UNAUTHORIZED))

// New returns a Munge. It does not contact munged; see SelfCheck.
// New returns a Munge. It does not contact munged; call SelfCheck at
// daemon start for that.
func New(o Options) (*Munge, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	return &Munge{
		socket:      append([]byte(o.Socket), 0),
		socketName:  o.Socket,
		ttl:         o.TTL,
		allowReplay: o.AllowReplay,
		sem:         make(chan struct{}, o.MaxInFlight),
		log:         o.Logger.Named("munge"),
	}, nil
}

// Socket returns the munged socket this Munge uses.
func (m *Munge) Socket() string { return m.socketName }

type result struct {
	code      int
	msg       string
	cred      string
	payload   []byte
	uid, gid  uint32
	encodedAt int64
	decodedAt int64
}

// Encode implements auth.Authenticator. Any goroutine; blocks on munged.
func (m *Munge) Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error) {
	if len(payload) > math.MaxInt32 {
		return "", &Error{Op: "encode", Code: eBadLength, Msg: "payload over 2 GiB", Err: auth.ErrInvalid}
	}
	r, err := m.call(ctx, "encode", func() result { return m.encode(payload, restrictUID) })
	if err != nil {
		return "", err
	}
	return r.cred, nil
}

// Decode implements auth.Authenticator. Any goroutine; blocks on munged.
// cred may carry the trailing NUL it has on the wire; any other NUL makes it
// invalid (C would stop there and ignore the rest).
func (m *Munge) Decode(ctx context.Context, cred string) (auth.Credential, error) {
	cred = strings.TrimSuffix(cred, "\x00")
	if cred == "" || strings.IndexByte(cred, 0) >= 0 {
		return auth.Credential{}, &Error{Op: "decode", Code: eBadCred,
			Msg: "empty credential or credential with NUL", Err: auth.ErrInvalid}
	}
	r, err := m.call(ctx, "decode", func() result { return m.decode(cred) })
	if err != nil {
		return auth.Credential{}, err
	}
	return auth.Credential{UID: r.uid, GID: r.gid, Payload: r.payload,
		Replayed: r.code == eCredReplayed}, nil
}

// call runs one libmunge operation: bounded by MaxInFlight, retrying
// EMUNGE_SOCKET like Slurm, returning early when ctx is done.
func (m *Munge) call(ctx context.Context, op string, f func() result) (result, error) {
	var last *Error // previous EMUNGE_SOCKET failure, for the ctx error
	stopped := func(stage string, attempts int) error {
		if last != nil {
			return fmt.Errorf("%w; %s after %d attempts: %w", last, stage, attempts, ctx.Err())
		}
		return fmt.Errorf("munge: %s via %s: %w: %s: %w", op, m.socketName, auth.ErrUnavailable, stage, ctx.Err())
	}
	if ctx.Err() != nil {
		return result{}, stopped("not started", 0)
	}
	for attempt := 0; ; attempt++ {
		r, stage := m.once(ctx, f)
		if stage != "" {
			return result{}, stopped(stage, attempt)
		}
		switch {
		case r.code == eSuccess:
			return r, nil
		case r.code == eCredReplayed && op == "decode" && m.allowReplay:
			return r, nil
		case r.code == eSocket && attempt < socketRetries:
			// As in Slurm, a Decode retried here is a new transaction for
			// munged: if the lost one got as far as the replay cache, the
			// retry reports EMUNGE_CRED_REPLAYED (libmunge's own retries
			// are exempt, ours are not).
			last = m.fail(op, r)
			m.log.Debug("munged not answering, retrying", "op", op, "attempt", attempt+1, "error", r.msg)
			t := time.NewTimer(socketRetryPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return result{}, stopped("gave up", attempt+1)
			case <-t.C:
			}
		default:
			if r.code == eSocket {
				// Slurm's hint: munged's 2 default threads are too few.
				m.log.Error("munged unreachable; if it is up, restart it with --num-threads=10",
					"op", op, "socket", m.socketName, "attempts", attempt+1, "error", r.msg)
			}
			return result{}, m.fail(op, r)
		}
	}
}

func (m *Munge) fail(op string, r result) *Error {
	msg := r.msg
	switch r.code {
	case eCredExpired, eCredRewound, eCredReplayed:
		if r.encodedAt != 0 {
			msg = fmt.Sprintf("%s: encoded %s, decoded %s", msg,
				time.Unix(r.encodedAt, 0).UTC().Format(time.RFC3339),
				time.Unix(r.decodedAt, 0).UTC().Format(time.RFC3339))
		}
	}
	return &Error{Op: op, Code: r.code, Msg: msg, Err: sentinel(r.code)}
}

// once runs f in a MaxInFlight slot. With a cancellable ctx, f runs in its
// own goroutine so the caller can leave when ctx is done; f owns and frees
// its C memory either way. A non-empty stage says where ctx stopped it.
func (m *Munge) once(ctx context.Context, f func() result) (result, string) {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return result{}, "waiting for a slot"
	}
	if ctx.Done() == nil {
		defer func() { <-m.sem }()
		return f(), ""
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-m.sem }()
		done <- f()
	}()
	select {
	case r := <-done:
		return r, ""
	case <-ctx.Done():
		return result{}, "abandoned in flight"
	}
}

// cbytes returns a pointer C may read for the duration of one call.
func cbytes(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func (m *Munge) encode(payload []byte, restrictUID uint32) result {
	var r C.tiee_munge_result
	restrict := C.int(0)
	if restrictUID != auth.UIDAny {
		restrict = 1
	}
	C.tiee_encode((*C.char)(cbytes(m.socket)), cbytes(payload), C.int(len(payload)),
		restrict, C.uint(restrictUID), C.int(m.ttl), &r)
	out := result{code: int(r.err)}
	if r.cred != nil {
		out.cred = C.GoString(r.cred)
		C.free(unsafe.Pointer(r.cred))
	}
	if out.code != eSuccess {
		out.msg = C.GoString(&r.msg[0])
	}
	return out
}

func (m *Munge) decode(cred string) result {
	cs := make([]byte, len(cred)+1) // NUL-terminated copy in Go memory
	copy(cs, cred)
	var r C.tiee_munge_result
	C.tiee_decode((*C.char)(cbytes(m.socket)), (*C.char)(cbytes(cs)), &r)
	out := result{code: int(r.err), uid: uint32(r.uid), gid: uint32(r.gid),
		encodedAt: int64(r.encoded), decodedAt: int64(r.decoded)}
	if r.buf != nil {
		// libmunge allocates the payload on success and also on
		// expired/rewound/replayed; free it on every path.
		if r.len > 0 {
			out.payload = C.GoBytes(r.buf, r.len)
		}
		C.free(r.buf)
	}
	if out.code != eSuccess {
		out.msg = C.GoString(&r.msg[0])
	}
	return out
}

// SelfCheck verifies munged enforces uid restrictions against this
// process, as Slurm's auth/munge init does in daemons: munged can be built
// to let root decode any credential (MUNGE_AUTH_ROOT_ALLOW_FLAG), which
// would let root read job credentials meant for SlurmdUser. It encodes a
// credential restricted to getuid()+1 and requires the decode to fail with
// auth.ErrUIDRestricted. It also proves munged is reachable. Call it once
// at daemon start; any goroutine.
func (m *Munge) SelfCheck(ctx context.Context) error {
	uid := uint32(os.Getuid())
	cred, err := m.Encode(ctx, nil, uid+1)
	if err != nil {
		return fmt.Errorf("munge: self-check: %w", err)
	}
	_, err = m.Decode(ctx, cred)
	switch {
	case errors.Is(err, auth.ErrUIDRestricted):
		return nil
	case err == nil:
		return fmt.Errorf("munge: self-check: %w: uid %d decoded a credential restricted to uid %d (munged allows root to decode any credential)",
			auth.ErrInvalid, uid, uid+1)
	default:
		return fmt.Errorf("munge: self-check: %w", err)
	}
}
