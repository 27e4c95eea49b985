package munge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// Munge is an auth.Authenticator that speaks munged's socket protocol
// (wire.go) from Go, so a call waiting for munged parks a goroutine on the
// netpoller instead of holding an OS thread in a C call. It is safe for
// concurrent use.
//
// Waiting follows libmunge: up to 10 connect attempts with 50 ms linear
// back-off while munged's listen queue is full, a 2 s bound on sending the
// request and on receiving the response, and 5 transaction attempts with
// 10 ms linear back-off (the header's retry count tells munged not to take
// a retried decode for a replay). On top of that EMUNGE_SOCKET is retried
// every 100 ms up to 20 times, like Slurm. Every wait also ends when ctx is
// done. Note that an abandoned Decode may still have entered the credential
// into munged's replay cache.
type Munge struct {
	socketName  string
	ttl         int
	allowReplay bool
	sem         chan struct{} // MaxInFlight slots
	log         hclog.Logger
}

var _ auth.Authenticator = (*Munge)(nil)

// New returns a Munge. It does not contact munged; call SelfCheck at
// daemon start for that.
func New(o Options) (*Munge, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	return &Munge{
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

// PluginID implements auth.Authenticator.
func (m *Munge) PluginID() uint32 { return auth.PluginMunge }

// Encode implements auth.Authenticator. Any goroutine; blocks on munged.
func (m *Munge) Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error) {
	if len(payload) > math.MaxInt32 {
		return "", &Error{Op: "encode", Code: eBadLength, Msg: "payload over 2 GiB", Err: auth.ErrInvalid}
	}
	authUID := uint32(uidAny)
	if restrictUID != auth.UIDAny {
		authUID = restrictUID
	}
	r, err := m.call(ctx, xfer{op: "encode", rsp: msgEncRsp, parse: encodeResponse, req: func(retry uint8) []byte {
		return encodeRequest(retry, payload, m.ttl, authUID)
	}})
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
	if len(cred)+5 > maxRequest {
		return auth.Credential{}, &Error{Op: "decode", Code: eBadLength, Msg: strerror(eBadLength), Err: auth.ErrInvalid}
	}
	r, err := m.call(ctx, xfer{op: "decode", rsp: msgDecRsp, parse: decodeResponse, req: func(retry uint8) []byte {
		return decodeRequest(retry, cred)
	}})
	if err != nil {
		return auth.Credential{}, err
	}
	return auth.Credential{UID: r.uid, GID: r.gid, Payload: r.payload,
		Replayed: r.code == eCredReplayed}, nil
}

// call runs one munge operation: bounded by MaxInFlight, retrying
// EMUNGE_SOCKET like Slurm, returning early when ctx is done.
// xfer is one kind of transaction: its request (built per attempt, with
// the retry count), the response type and its parser.
type xfer struct {
	op    string // "encode" or "decode"
	req   func(retry uint8) []byte
	rsp   uint8
	parse func([]byte) (result, error)
}

func (m *Munge) call(ctx context.Context, x xfer) (result, error) {
	op := x.op
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
		r, stage := m.once(ctx, x)
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
			// retry reports EMUNGE_CRED_REPLAYED (retries within one
			// transaction are exempt, these are not).
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

// once runs one transaction in a MaxInFlight slot. A non-empty stage says
// where ctx stopped it.
func (m *Munge) once(ctx context.Context, x xfer) (result, string) {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return result{}, "waiting for a slot"
	}
	defer func() { <-m.sem }()
	return m.transaction(ctx, x)
}

// libmunge's bounds on one transaction (munge_defs.h).
const (
	connectAttempts    = 10
	connectRetryPause  = 50 * time.Millisecond
	xferAttempts       = 5
	xferRetryPause     = 10 * time.Millisecond
	socketIOTimeout    = 2 * time.Second
	stageAbandoned     = "abandoned in flight"
	stageConnectPaused = "waiting to reconnect"
)

// transaction is m_msg_client_xfer: connect, send the request, read the
// response; a failed send or receive is tried again on a new connection
// with the retry count in the header. A failed connect ends it at once.
func (m *Munge) transaction(ctx context.Context, x xfer) (result, string) {
	for attempt := 1; ; attempt++ {
		c, r, stage := m.connect(ctx)
		if stage != "" || c == nil {
			return r, stage
		}
		r, err := exchange(ctx, c, x.req(uint8(attempt-1)), x.rsp, x.parse)
		c.Close()
		if err == nil {
			if r.msg == "" && r.code != eSuccess {
				r.msg = strerror(r.code)
			}
			return r, ""
		}
		if ctx.Err() != nil {
			return result{}, stageAbandoned
		}
		if attempt >= xferAttempts {
			return result{code: eSocket, msg: err.Error()}, ""
		}
		if !sleepCtx(ctx, time.Duration(attempt)*xferRetryPause) {
			return result{}, stageAbandoned
		}
	}
}

// connect opens a connection to munged; a nil conn comes with the failure.
func (m *Munge) connect(ctx context.Context) (*net.UnixConn, result, string) {
	var d net.Dialer
	for attempt := 1; ; attempt++ {
		c, err := d.DialContext(ctx, "unix", m.socketName)
		if err == nil {
			return c.(*net.UnixConn), result{}, ""
		}
		if ctx.Err() != nil {
			return nil, result{}, stageAbandoned
		}
		// A full listen queue refuses a unix socket connect at once.
		if !errors.Is(err, syscall.ECONNREFUSED) || attempt >= connectAttempts {
			return nil, result{code: eSocket, msg: m.connectError(err)}, ""
		}
		if !sleepCtx(ctx, time.Duration(attempt)*connectRetryPause) {
			return nil, result{}, stageConnectPaused
		}
	}
}

// connectError explains a failed connect in libmunge's words; the socket is
// only looked at once connecting has failed.
func (m *Munge) connectError(err error) string {
	st, serr := os.Stat(m.socketName)
	switch {
	case serr != nil:
		return fmt.Sprintf("Failed to access \"%s\": %s (Did you start munged?)", m.socketName, errnoText(serr))
	case st.Mode()&os.ModeSocket == 0:
		return fmt.Sprintf("Invalid file type for socket \"%s\"", m.socketName)
	}
	return fmt.Sprintf("Failed to connect to \"%s\": %s", m.socketName, errnoText(err))
}

// exchange sends one request and reads its response, each within
// socketIOTimeout and ctx.
func exchange(ctx context.Context, c *net.UnixConn, req []byte, rspType uint8, parse func([]byte) (result, error)) (result, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	deadline := func() time.Time {
		d := time.Now().Add(socketIOTimeout)
		if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
			return cd
		}
		return d
	}
	_ = c.SetWriteDeadline(deadline())
	if _, err := c.Write(req); err != nil {
		return result{}, fmt.Errorf("Failed to send message: %s", errnoText(err))
	}
	_ = c.SetReadDeadline(deadline())
	var h [msgHdrSize]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return result{}, fmt.Errorf("Failed to receive message header: %s", errnoText(err))
	}
	n, err := parseHeader(h[:], rspType)
	if err != nil {
		return result{}, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return result{}, fmt.Errorf("Failed to receive message body: %s", errnoText(err))
	}
	r, err := parse(body)
	if err != nil {
		return result{}, fmt.Errorf("Failed to unpack message type %d: %w", rspType, err)
	}
	return r, nil
}

// errnoText is the strerror-style text of a socket error.
func errnoText(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "Timed-out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "Connection closed by munged"
	}
	return err.Error()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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
