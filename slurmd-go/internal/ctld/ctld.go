// Package ctld is the daemon's client of slurmctld: one request, one reply,
// signed with the cluster's auth plugin, tried against each SlurmctldHost
// in turn, in the protocol version the controller speaks.
//
// The version is the controller's choice. Until it is known the client
// negotiates (Negotiate): it sends REQUEST_PING in each release it speaks,
// newest first, and keeps the first one the controller answers in kind. A
// controller refuses a version it cannot read in one of three ways, all
// seen with the real releases: 24.11 answers RESPONSE_SLURM_RC in its own
// version (so the client goes straight to the newest release it speaks at
// or below that), 22.05 closes the connection, and 26.05 answers HTTP 405.
package ctld

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// ConnectTimeout bounds one dial to a controller.
const ConnectTimeout = 5 * time.Second

// Config says where slurmctld is and how long to wait for it.
type Config struct {
	// Hosts are "host:port" of SlurmctldHost entries, primary first.
	Hosts []string
	// MessageTimeout bounds one request/reply exchange (MessageTimeout).
	MessageTimeout time.Duration
	HashPolicy     auth.HashPolicy
	MaxFrame       uint32
}

// Client talks to slurmctld. Safe for concurrent use.
type Client struct {
	auth auth.Authenticator
	cfg  func() Config
	log  hclog.Logger

	version atomic.Uint32 // the controller's protocol version; 0 until known
	pinned  bool          // set by Pin: never negotiate
	negMu   sync.Mutex    // one negotiation at a time
	// first is tried first when negotiating (the version an earlier
	// daemon negotiated, from the spool); guarded by negMu.
	first uint16
	// OnVersion, if set, learns every version the client settles on (the
	// daemon saves it); set before the first call.
	OnVersion func(uint16)
}

// New returns a client; cfg is read per call so reconfigure takes effect.
func New(a auth.Authenticator, cfg func() Config, log hclog.Logger) *Client {
	return &Client{auth: a, cfg: cfg, log: log.Named("ctld")}
}

// ErrNoController is returned when no SlurmctldHost answered.
var ErrNoController = errors.New("ctld: no controller answered")

// ErrIncompatible is returned when the controller speaks no release this
// client speaks.
var ErrIncompatible = errors.New("ctld: slurmctld speaks no protocol version slurmd-go speaks")

// refusedError is a controller's refusal of the request's version.
type refusedError struct {
	sent   uint16 // the version we sent
	theirs uint16 // the version of its answer, 0 if it sent none
	how    string
}

func (e *refusedError) Error() string {
	if e.theirs != 0 {
		return fmt.Sprintf("ctld: slurmctld refused protocol 0x%04x (Slurm %s) and answered in 0x%04x (Slurm %s): %s",
			e.sent, slurmproto.ReleaseName(e.sent), e.theirs, slurmproto.ReleaseName(e.theirs), e.how)
	}
	return fmt.Sprintf("ctld: slurmctld refused protocol 0x%04x (Slurm %s): %s", e.sent, slurmproto.ReleaseName(e.sent), e.how)
}

// Version is the controller's protocol version, 0 while unknown.
func (c *Client) Version() uint16 { return uint16(c.version.Load()) }

// Pin fixes the version: the client never negotiates (a release set by
// the operator, or a step manager speaking its launch's version).
func (c *Client) Pin(v uint16) {
	c.pinned = true
	c.version.Store(uint32(v))
}

// TryFirst makes v the first version a negotiation tries.
func (c *Client) TryFirst(v uint16) {
	c.negMu.Lock()
	c.first = v
	c.negMu.Unlock()
}

// Negotiate finds the controller's version if it is not known yet and
// returns it.
func (c *Client) Negotiate(ctx context.Context) (uint16, error) {
	if v := c.Version(); v != 0 {
		return v, nil
	}
	c.negMu.Lock()
	defer c.negMu.Unlock()
	if v := c.Version(); v != 0 {
		return v, nil
	}
	tried := map[uint16]bool{}
	next := c.first
	if !slurmproto.Speaks(next) {
		next = slurmproto.Spoken()[0]
	}
	var last error
	for next != 0 {
		tried[next] = true
		_, err := c.call(ctx, next, slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.UIDAny)
		if err == nil {
			c.settle(next)
			return next, nil
		}
		var ref *refusedError
		if !errors.As(err, &ref) {
			return 0, err // nobody answered: try again later
		}
		last = err
		c.log.Debug("protocol version refused", "error", err)
		next = nextCandidate(ref, tried)
	}
	c.log.Error("slurmctld speaks no protocol version slurmd-go speaks", "error", last, "speaks", spokenNames())
	return 0, fmt.Errorf("%w: %w", ErrIncompatible, last)
}

// nextCandidate is the release to try after ref: the newest spoken one at
// or below the controller's answer if it gave one, else the next older.
func nextCandidate(ref *refusedError, tried map[uint16]bool) uint16 {
	if ref.theirs != 0 {
		if v, ok := slurmproto.SpokenAtMost(ref.theirs); ok && !tried[v] {
			return v
		}
		return 0
	}
	for _, v := range slurmproto.Spoken() {
		if v < ref.sent && !tried[v] {
			return v
		}
	}
	return 0
}

func spokenNames() string {
	var b bytes.Buffer
	for i, v := range slurmproto.Spoken() {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(slurmproto.ReleaseName(v))
	}
	return b.String()
}

func (c *Client) settle(v uint16) {
	if old := c.version.Swap(uint32(v)); uint16(old) != v {
		c.log.Info("speaking the controller's protocol", "version", fmt.Sprintf("0x%04x", v), "release", slurmproto.ReleaseName(v))
		if c.OnVersion != nil {
			c.OnVersion(v)
		}
	}
}

// Call sends body with the credential restricted to restrictUID
// (auth.UIDAny for request/response RPCs) and returns the decoded reply.
func (c *Client) Call(ctx context.Context, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	return c.withVersion(ctx, func(v uint16) (slurmproto.Body, error) { return c.call(ctx, v, body, restrictUID) })
}

// CallAddr sends body to one host:port that is not a controller (srun's
// response port, another node) in the controller's version and returns the
// decoded reply.
func (c *Client) CallAddr(ctx context.Context, host string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	return c.withVersion(ctx, func(v uint16) (slurmproto.Body, error) {
		frame, err := c.encode(ctx, v, body, restrictUID)
		if err != nil {
			return nil, err
		}
		return c.exchange(ctx, c.cfg(), v, host, frame, true)
	})
}

// Send delivers body without waiting for a reply (slurm_send_only_controller_msg).
func (c *Client) Send(ctx context.Context, body slurmproto.Body, restrictUID uint32) error {
	_, err := c.withVersion(ctx, func(v uint16) (slurmproto.Body, error) {
		cfg := c.cfg()
		frame, err := c.encode(ctx, v, body, restrictUID)
		if err != nil {
			return nil, err
		}
		var errs []error
		for _, host := range cfg.Hosts {
			if _, err := c.exchange(ctx, cfg, v, host, frame, false); err == nil {
				return nil, nil
			} else {
				errs = append(errs, err)
			}
		}
		return nil, fmt.Errorf("%w: %w", ErrNoController, errors.Join(errs...))
	})
	return err
}

// withVersion runs f in the controller's version, negotiating first when
// it is unknown, and once more when the controller refuses it (it was
// upgraded or downgraded under us).
func (c *Client) withVersion(ctx context.Context, f func(v uint16) (slurmproto.Body, error)) (slurmproto.Body, error) {
	v, err := c.Negotiate(ctx)
	if err != nil {
		return nil, err
	}
	reply, err := f(v)
	var ref *refusedError
	if err == nil || !errors.As(err, &ref) || c.pinned {
		return reply, err
	}
	c.log.Warn("slurmctld no longer accepts our protocol version, negotiating again", "error", err)
	c.version.CompareAndSwap(uint32(v), 0)
	if v, err = c.Negotiate(ctx); err != nil {
		return nil, err
	}
	return f(v)
}

func (c *Client) call(ctx context.Context, v uint16, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	cfg := c.cfg()
	frame, err := c.encode(ctx, v, body, restrictUID)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, host := range cfg.Hosts {
		reply, err := c.exchange(ctx, cfg, v, host, frame, true)
		if err == nil {
			return reply, nil
		}
		var ref *refusedError
		if errors.As(err, &ref) {
			return nil, err // a controller answered: the version is the problem
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrNoController, errors.Join(errs...))
}

func (c *Client) encode(ctx context.Context, v uint16, body slurmproto.Body, restrictUID uint32) ([]byte, error) {
	b, err := slurmproto.EncodeBody(v, body)
	if err != nil {
		return nil, fmt.Errorf("ctld: encode %s: %w", body.MsgType(), err)
	}
	t := body.MsgType()
	cred, err := c.auth.Encode(ctx, auth.Payload(v, uint16(t), b, auth.HashK12), restrictUID)
	if err != nil {
		return nil, fmt.Errorf("ctld: sign %s: %w", t, err)
	}
	h := slurmproto.Header{Version: v, MsgType: t}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: c.auth.PluginID(), Cred: cred}, b), nil
}

func (c *Client) exchange(ctx context.Context, cfg Config, v uint16, host string, frame []byte, wantReply bool) (slurmproto.Body, error) {
	dctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ctld: connect %s: %w", host, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(cfg.MessageTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(frame); err != nil {
		return nil, fmt.Errorf("ctld: send to %s: %w", host, err)
	}
	if !wantReply {
		return nil, nil
	}
	var lb [4]byte
	if _, err := io.ReadFull(conn, lb[:]); err != nil {
		if errors.Is(err, io.EOF) {
			// 22.05 closes a connection whose header version it cannot read.
			return nil, &refusedError{sent: v, how: "closed the connection without an answer"}
		}
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	if bytes.Equal(lb[:], []byte("HTTP")) {
		// 26.05's port serves HTTP too; a version it cannot read is HTTP to it.
		return nil, &refusedError{sent: v, how: "answered HTTP (it does not read this version as Slurm RPC)"}
	}
	rf, err := slurmproto.ReadFrame(io.MultiReader(bytes.NewReader(lb[:]), conn), cfg.MaxFrame)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	msg, err := slurmproto.DecodeMessage(rf)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	if msg.Header.Version != v {
		rc := ""
		if b, err := slurmproto.DecodeBody(msg.Header.Version, msg.Header.MsgType, msg.Body); err == nil {
			if r, ok := b.(*slurmproto.ReturnCode); ok {
				rc = ", rc " + slurmproto.RCName(r.RC)
			}
		}
		return nil, &refusedError{sent: v, theirs: msg.Header.Version, how: msg.Header.MsgType.String() + rc}
	}
	// From 24.11 on replies carry no credential, and one that does is not
	// verified on the reply path (slurm_receive_msg: the connection was
	// authenticated the other way). 22.05 verified it.
	if msg.Header.Flags&slurmproto.FlagNoAuthCred == 0 && v < slurmproto.Version2302 {
		cred, err := c.auth.Decode(ctx, msg.Auth.Cred)
		if err != nil {
			return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
		}
		if _, err := auth.CheckPayload(msg.Header.Version, uint16(msg.Header.MsgType), msg.Body, cred.Payload, cfg.HashPolicy); err != nil {
			return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
		}
	}
	body, err := slurmproto.DecodeBody(msg.Header.Version, msg.Header.MsgType, msg.Body)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	if r, ok := body.(*slurmproto.ReturnCode); ok && r.RC == slurmproto.SlurmProtocolVersionError {
		return nil, &refusedError{sent: v, how: "rc SLURM_PROTOCOL_VERSION_ERROR"}
	}
	return body, nil
}
