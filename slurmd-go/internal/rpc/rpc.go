// Package rpc turns request frames into handler calls and handler results
// into reply frames: header and version checks, message forwarding, munge
// verification, the body hash, body decoding, authorization, and the reply's
// credential. It implements rpcserver.Dispatcher; handlers never see bytes.
//
//	frame ─▶ header ─▶ forward (children) ─▶ munge ─▶ hash ─▶ body ─▶ authz ─▶ handler
//	                          │                                                  │
//	                          └────────────── ret_list ◀── wait ◀────── reply ◀──┘
package rpc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpcserver"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Request is one decoded, authenticated RPC.
type Request struct {
	Header  slurmproto.Header
	Body    slurmproto.Body
	RawBody []byte // the exact received body bytes (credential signatures cover them)
	UID     uint32 // from the munge credential
	GID     uint32
	Peer    netip.AddrPort  // TCP peer
	Orig    slurmproto.Addr // originator: the header's orig_addr, else Peer
	Hash    auth.HashKind   // the request's body hash kind; replies mirror NONE
}

// Type returns the request's message type.
func (r *Request) Type() slurmproto.MsgType { return r.Header.MsgType }

// Reply is what a handler answers.
type Reply struct {
	// Body is the reply body; nil sends no reply (reconfigure, shutdown).
	Body slurmproto.Body
	// Copy marks replies that slurmd builds with slurm_msg_t_copy (ping,
	// daemon status, step stat, pids, reattach): the credential is
	// restricted to the requester and the hash is always K12.
	Copy bool
	// Sent, if set, learns whether the reply reached the socket (nil) or not
	// (rpcserver.OnReplySent); it runs on its own goroutine, and only for
	// requests that an rpcserver serves.
	Sent func(err error)
}

// NoReply is the reply of handlers that answer nothing.
var NoReply = Reply{}

// RC is a plain RESPONSE_SLURM_RC reply.
func RC(rc uint32) Reply { return Reply{Body: slurmproto.ReturnCode{RC: rc}} }

// Handler serves one request type. It runs on a worker; ctx carries the
// connection deadline. A returned error becomes RESPONSE_SLURM_RC with
// ErrorToRC(err).
type Handler func(ctx context.Context, req *Request) (Reply, error)

// Route binds a handler to a message type with its authorization rule.
type Route struct {
	Handle Handler
	// Privileged requests are only taken from root or SlurmUser
	// (_slurm_authorized_user). Others get ESLURM_USER_ID_MISSING, or
	// nothing when the message type has no reply.
	Privileged bool
	// NoReplyType: the sender expects no answer (reconfigure, shutdown,
	// reboot, job notify), also when refused.
	NoReplyType bool
	// FromCtld marks the RPCs whose arrival slurmd records as its "last
	// slurmctld msg time" (scontrol show slurmd).
	FromCtld bool
}

// Registry maps message types to routes.
type Registry map[slurmproto.MsgType]Route

// Forwarder relays a message to the nodes in its forward list.
type Forwarder interface {
	// Start relays authAndBody to h.Forward.Nodes and returns at once.
	Start(ctx context.Context, h slurmproto.Header, authAndBody []byte, orig slurmproto.Addr) Pending
}

// Pending is a forward in flight.
type Pending interface {
	// Wait returns one entry per forwarded node, failed ones included,
	// once all answered or their time ran out.
	Wait(ctx context.Context) []slurmproto.RetEntry
}

// Settings are the config values the dispatcher reads per request; the
// daemon swaps them on reconfigure.
type Settings struct {
	SlurmUID    uint32
	SlurmdUID   uint32
	HashPolicy  auth.HashPolicy
	AuthTimeout time.Duration // bound on one munge call
	// ReplyVersion is the version of error replies to frames whose header
	// did not decode: the controller's, once known (nil or 0: 22.05).
	ReplyVersion func() uint16
}

// Dispatcher implements rpcserver.Dispatcher.
type Dispatcher struct {
	auth        auth.Authenticator
	routes      Registry
	fwd         Forwarder
	settings    atomic.Pointer[Settings]
	log         hclog.Logger
	dropped     atomic.Uint64 // requests dropped by Overloaded
	lastDropLog atomic.Int64  // unix time of the last drop warning
	// OnCtldMessage is called for every served request of a FromCtld route
	// (REQUEST_DAEMON_STATUS reports the last one).
	OnCtldMessage func()
	// Observer, if set, learns of every request served (telemetry). Set
	// it before serving.
	Observer Observer
}

// New builds a dispatcher. fwd may be nil (forward lists are then answered
// with RESPONSE_FORWARD_FAILED entries).
func New(a auth.Authenticator, routes Registry, fwd Forwarder, s Settings, log hclog.Logger) *Dispatcher {
	d := &Dispatcher{auth: a, routes: routes, fwd: fwd, log: log.Named("rpc")}
	d.SetSettings(s)
	return d
}

// SetSettings swaps the settings; any goroutine.
func (d *Dispatcher) SetSettings(s Settings) {
	if s.AuthTimeout == 0 {
		s.AuthTimeout = DefaultAuthTimeout
	}
	d.settings.Store(&s)
}

func (s *Settings) replyVersion() uint16 {
	if s.ReplyVersion != nil {
		if v := s.ReplyVersion(); v != 0 {
			return v
		}
	}
	return slurmproto.Version2205
}

// DefaultAuthTimeout bounds one munged round trip.
const DefaultAuthTimeout = 5 * time.Second

func (d *Dispatcher) privileged(uid uint32) bool {
	s := d.settings.Load()
	return uid == 0 || uid == s.SlurmUID
}

// Serve implements rpcserver.Dispatcher. Any goroutine.
func (d *Dispatcher) Serve(ctx context.Context, frame []byte, peer netip.AddrPort) []byte {
	if d.Observer == nil {
		return d.serve(ctx, frame, peer, nil)
	}
	start := time.Now()
	o := Observation{Result: ResultOK}
	out := d.serve(ctx, frame, peer, &o)
	o.Elapsed = time.Since(start)
	d.Observer.ObserveRPC(o)
	return out
}

func (d *Dispatcher) serve(ctx context.Context, frame []byte, peer netip.AddrPort, o *Observation) []byte {
	s := d.settings.Load()
	msg, err := slurmproto.DecodeMessage(frame)
	if err != nil && msg.AuthAndBody == nil { // the header itself did not decode
		o.set(ResultMalformed)
		d.log.Warn("malformed request", "peer", peer, "error", err)
		return d.errorReply(ctx, s.replyVersion(), slurmproto.Header{}, rcForDecode(err), auth.UIDAny, peer)
	}
	h := msg.Header
	if o != nil {
		o.Version, o.MsgType = h.Version, h.MsgType
	}
	log := d.log.With("peer", peer, "msg_type", h.MsgType.String())
	orig := h.OrigAddr
	if orig.IsUnspec() {
		orig = slurmproto.AddrFrom(peer)
	}

	// Forward first, as slurmd does: children get the untouched auth and
	// body while we verify and serve our own copy.
	var pending Pending
	if h.Forward.Count > 0 {
		log.Debug("forwarding request", "nodes", h.Forward.Nodes, "count", h.Forward.Count, "tree_width", h.Forward.TreeWidth)
		pending = d.startForward(ctx, h, msg.AuthAndBody, orig)
	}
	if err != nil {
		log.Warn("malformed request", "error", err)
		o.set(ResultMalformed)
		return d.finish(ctx, h, pending, d.rcBody(rcForDecode(err)), false, auth.UIDAny, auth.HashK12, peer)
	}

	cred, err := d.verify(ctx, s, msg)
	if err != nil {
		log.Warn("authentication failed", "error", err)
		o.set(ResultAuth)
		return d.finish(ctx, h, pending, d.rcBody(auth.RC(err)), false, auth.UIDAny, auth.HashK12, peer)
	}
	if cred.Replayed {
		log.Debug("replayed credential accepted (several nodes share this munged)")
	}
	kind, err := auth.CheckPayload(h.Version, uint16(h.MsgType), msg.Body, cred.Payload, s.HashPolicy)
	if err != nil {
		log.Warn("message hash check failed", "uid", cred.UID, "error", err)
		o.set(ResultAuth)
		return d.finish(ctx, h, pending, d.rcBody(auth.RC(err)), false, cred.UID, auth.HashK12, peer)
	}
	req := &Request{Header: h, RawBody: msg.Body, UID: cred.UID, GID: cred.GID, Peer: peer, Orig: orig, Hash: kind}
	route, ok := d.routes[h.MsgType]
	if !ok {
		// As slurmd: a type Slurm cannot unpack is an incomplete packet;
		// one it unpacks but does not serve is EINVAL.
		rc := uint32(slurmproto.EINVAL)
		if !h.MsgType.KnownIn(h.Version) {
			rc = slurmproto.ESlurmProtocolIncompletePacket
		}
		log.Warn("unsupported request type", "uid", cred.UID, "type_num", uint16(h.MsgType), "rc", slurmproto.RCName(rc))
		o.set(ResultUnsupported)
		return d.finish(ctx, h, pending, d.rcBody(rc), false, cred.UID, kind, peer)
	}
	if slurmproto.HasBody(h.Version, h.MsgType) {
		if req.Body, err = slurmproto.DecodeBody(h.Version, h.MsgType, msg.Body); err != nil {
			log.Warn("malformed request body", "uid", cred.UID, "error", err)
			o.set(ResultMalformed)
			return d.finish(ctx, h, pending, d.rcBody(rcForDecode(err)), false, cred.UID, kind, peer)
		}
	} else if slurmproto.Registered(h.MsgType) {
		// A body with layouts in other releases only: never hand a
		// handler a nil body, never read it with another release's layout.
		log.Warn("request body has no layout in this release", "uid", cred.UID,
			"version", fmt.Sprintf("0x%04x", h.Version), "release", slurmproto.ReleaseName(h.Version))
		o.set(ResultUnsupported)
		return d.finish(ctx, h, pending, d.rcBody(slurmproto.SlurmProtocolVersionError), false, cred.UID, kind, peer)
	}
	if route.Privileged && !d.privileged(cred.UID) {
		log.Error("security violation: request from unauthorized uid", "uid", cred.UID)
		o.set(ResultDenied)
		if route.NoReplyType {
			return d.finish(ctx, h, pending, nil, false, cred.UID, kind, peer)
		}
		return d.finish(ctx, h, pending, d.rcBody(slurmproto.ESlurmUserIDMissing), false, cred.UID, kind, peer)
	}
	if route.FromCtld && d.OnCtldMessage != nil {
		d.OnCtldMessage()
	}
	if log.IsTrace() {
		log.Trace("serving request", "uid", cred.UID, "forward", h.Forward.Count)
	}
	rep, err := route.Handle(ctx, req)
	if err != nil {
		log.Debug("request failed", "uid", cred.UID, "error", err)
		rep = Reply{Body: slurmproto.ReturnCode{RC: ErrorToRC(err)}, Sent: rep.Sent}
	}
	if rc, ok := rep.Body.(slurmproto.ReturnCode); ok && rc.RC != 0 {
		o.set(ResultError)
	}
	if rep.Sent != nil && !rpcserver.OnReplySent(ctx, rep.Sent) {
		// No rpcserver writes this reply (a direct Serve): it is as sent
		// as it will be once built.
		out := d.finish(ctx, h, pending, rep.Body, rep.Copy, cred.UID, kind, peer)
		var err error
		if out == nil {
			err = rpcserver.ErrNotSent
		}
		go rep.Sent(err)
		return out
	}
	return d.finish(ctx, h, pending, rep.Body, rep.Copy, cred.UID, kind, peer)
}

// Overloaded implements rpcserver.Dispatcher: runs on the event loop, so it
// answers nothing (a munge encode would block); the client sees the
// connection closed and retries as it does for a busy slurmd.
func (d *Dispatcher) Overloaded(frame []byte, peer netip.AddrPort) []byte {
	n := d.dropped.Add(1)
	now := time.Now().Unix()
	// One line per OverloadLogEvery at most: a flood must not also flood the log.
	if last := d.lastDropLog.Load(); now-last >= int64(OverloadLogEvery/time.Second) && d.lastDropLog.CompareAndSwap(last, now) {
		d.log.Warn("worker pool full, requests dropped", "peer", peer, "dropped_total", n)
	}
	return nil
}

// OverloadLogEvery spaces the warnings about dropped requests.
const OverloadLogEvery = 10 * time.Second

func (d *Dispatcher) verify(ctx context.Context, s *Settings, msg *slurmproto.Message) (auth.Credential, error) {
	if msg.Header.Flags&slurmproto.FlagNoAuthCred != 0 {
		return auth.Credential{}, fmt.Errorf("%w: request without a credential (header flag SLURM_NO_AUTH_CRED)", auth.ErrInvalid)
	}
	if want := d.auth.PluginID(); msg.Auth.PluginID != want {
		return auth.Credential{}, fmt.Errorf("%w: auth plugin %d, this cluster uses %d", auth.ErrInvalid, msg.Auth.PluginID, want)
	}
	actx, cancel := context.WithTimeout(ctx, s.AuthTimeout)
	defer cancel()
	return d.auth.Decode(actx, msg.Auth.Cred)
}

func (d *Dispatcher) startForward(ctx context.Context, h slurmproto.Header, authAndBody []byte, orig slurmproto.Addr) Pending {
	if d.fwd == nil {
		return failedForward{h: h}
	}
	return d.fwd.Start(ctx, h, authAndBody, orig)
}

func (d *Dispatcher) rcBody(rc uint32) slurmproto.Body { return slurmproto.ReturnCode{RC: rc} }

// finish waits for forwarded replies, then encodes our reply with them.
// A nil body sends nothing, after the forwards are done (forward_wait).
func (d *Dispatcher) finish(ctx context.Context, h slurmproto.Header, pending Pending, body slurmproto.Body, copyStyle bool, reqUID uint32, kind auth.HashKind, peer netip.AddrPort) []byte {
	var ret []slurmproto.RetEntry
	if pending != nil {
		ret = pending.Wait(ctx)
	}
	if body == nil {
		return nil
	}
	out, err := d.encodeReply(ctx, h, ret, body, copyStyle, reqUID, kind)
	if err != nil {
		d.log.Error("cannot encode reply", "peer", peer, "msg_type", body.MsgType().String(), "error", err)
		return nil
	}
	return out
}

func (d *Dispatcher) errorReply(ctx context.Context, version uint16, h slurmproto.Header, rc uint32, uid uint32, peer netip.AddrPort) []byte {
	h.Version = version
	return d.finish(ctx, h, nil, d.rcBody(rc), false, uid, auth.HashK12, peer)
}

// EncodeReply builds a reply frame in the request's protocol version.
func (d *Dispatcher) encodeReply(ctx context.Context, req slurmproto.Header, ret []slurmproto.RetEntry, body slurmproto.Body, copyStyle bool, reqUID uint32, kind auth.HashKind) ([]byte, error) {
	s := d.settings.Load()
	version := req.Version
	if !slurmproto.ValidVersion(version) {
		version = s.replyVersion()
	}
	b, err := slurmproto.EncodeBody(version, body)
	if err != nil {
		return nil, err
	}
	h := slurmproto.Header{Version: version, MsgType: body.MsgType(), RetList: ret}
	restrict := reqUID
	if copyStyle {
		kind = auth.HashK12
	} else {
		// _resp_msg_setup: replies to the Slurm users may be read by any
		// of their daemons; user replies are for that user only.
		h.OrigAddr = req.OrigAddr
		if reqUID == 0 || reqUID == s.SlurmUID || reqUID == s.SlurmdUID || reqUID == auth.UIDAny {
			restrict = auth.UIDAny
		}
		if version >= slurmproto.Version2302 {
			// 24.11+ _resp_msg_setup: no credential at all, the requester
			// already trusts the connection. Only a 24.11+ peer sends us
			// versions past 22.05 (0x2700 is 24.11's oldest, used for
			// nodes it has not heard from yet), so the flag is understood.
			// Replies built as copies (ping, daemon status, ...) keep one.
			// The flags are the request's (_response_init copies them; 26.05
			// also leaves its internal SLURM_MSG_KEEP_BUFFER set).
			h.Flags = req.Flags | slurmproto.FlagNoAuthCred
			if version >= slurmproto.Version2605 {
				h.Flags |= slurmproto.FlagKeepBuffer
			}
			return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{}, b), nil
		}
	}
	actx, cancel := context.WithTimeout(ctx, s.AuthTimeout)
	defer cancel()
	cred, err := d.auth.Encode(actx, auth.Payload(version, uint16(h.MsgType), b, kind), restrict)
	if err != nil {
		return nil, fmt.Errorf("rpc: sign reply: %w", err)
	}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: d.auth.PluginID(), Cred: cred}, b), nil
}

func rcForDecode(err error) uint32 {
	if errors.Is(err, slurmproto.ErrUnsupportedVersion) { // ErrNoLayout too
		return slurmproto.SlurmProtocolVersionError
	}
	return slurmproto.ESlurmProtocolIncompletePacket
}

// failedForward answers every forwarded node as failed when no forwarder
// is configured.
type failedForward struct{ h slurmproto.Header }

func (f failedForward) Wait(context.Context) []slurmproto.RetEntry {
	out := make([]slurmproto.RetEntry, 0, f.h.Forward.Count)
	for _, n := range expandOrNil(f.h.Forward.Nodes) {
		out = append(out, slurmproto.RetEntry{Err: slurmproto.SlurmCommunicationsConnectionError, MsgType: slurmproto.ResponseForwardFailed, NodeName: n})
	}
	return out
}

func expandOrNil(nodes string) []string {
	l, err := hostlist.Expand(nodes)
	if err != nil {
		return nil
	}
	return l
}
