// Package limitsrv holds the limit servers the bench drives with the same client as the real
// daemons. Each speaks just enough of the Slurm protocol to answer REQUEST_PING (connection
// per RPC, one goroutine per connection, plain net), in the header version it is configured
// for (22.05 or 24.11):
//
//   - ModeNoAuth reads a request frame and writes a canned RESPONSE_PING_SLURMD without
//     looking at it: the machine's connection-per-RPC ceiling.
//   - ModeMunge decodes the request's credential through munged, checks the body hash as
//     slurmd does, encodes the reply's credential through munged (22.05; a 24.11 reply carries
//     none) and writes the reply: the ceiling of any daemon that authenticates every RPC with
//     munge.
//   - ModeSlurm verifies the request's auth/slurm token (HS256 signature, expiry, ruid,
//     context) with the cluster's slurm.key, checks the body hash and writes the reply without
//     an auth block, as 24.11 daemons reply: the ceiling of any daemon that authenticates
//     every RPC with auth/slurm.
//
// A stats listener answers each connection with one JSON line (Stats), so the bench can
// measure the share of each request spent in authentication.
package limitsrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Mode selects the server's behaviour.
type Mode string

// Modes.
const (
	ModeNoAuth Mode = "noauth"
	ModeMunge  Mode = "munge"
	ModeSlurm  Mode = "slurm"
)

// replyUnsigned is the oldest release whose replies carry no auth block (SLURM_NO_AUTH_CRED
// on every response: 24.11's slurm_send_node_msg).
const replyUnsigned = slurmproto.Version2411

// Named limits.
const (
	connTimeout = 10 * time.Second // Slurm's default MessageTimeout, as the daemons use
	maxRequest  = 1 << 20          // a ping is ~150 bytes
)

// Stats are cumulative counters, in nanoseconds where timed.
type Stats struct {
	Requests   int64 `json:"requests"`    // replies written
	Failures   int64 `json:"failures"`    // requests dropped (bad frame, munge error)
	HandleNS   int64 `json:"handle_ns"`   // from complete request frame to reply written
	DecodeNS   int64 `json:"decode_ns"`   // verifying the request's credential: munged decode, or the token check (ModeSlurm)
	EncodeNS   int64 `json:"encode_ns"`   // signing the reply: munged encode (ModeMunge at 22.05)
	OpenConns  int64 `json:"open_conns"`  // connections open now
	TotalConns int64 `json:"total_conns"` // connections accepted
}

// Config configures a Server.
type Config struct {
	Mode      Mode
	Addr      string // RPC listen address
	StatsAddr string // stats listen address; "" for none
	// Auth makes and checks credentials: munge for ModeMunge, the cluster's authslurm.Auth for
	// ModeSlurm. In ModeNoAuth at 22.05 it signs the canned reply once, at start; ModeNoAuth at
	// 24.11 needs none.
	Auth auth.Authenticator
	// Version is the header version of the canned reply (ModeNoAuth); the others answer in
	// the request's. 0 means 22.05.
	Version uint16
}

// Server is a running limit server. Its methods are safe for concurrent use.
type Server struct {
	mode   Mode
	auth   auth.Authenticator
	ln     net.Listener
	stats  net.Listener
	canned []byte // ModeNoAuth: the complete reply frame

	requests, failures, handleNS, decodeNS, encodeNS atomic.Int64
	open, total                                      atomic.Int64

	wg      sync.WaitGroup
	closing atomic.Bool
}

// New starts a server as cfg says.
func New(ctx context.Context, cfg Config) (*Server, error) {
	mode, a, version := cfg.Mode, cfg.Auth, cfg.Version
	if version == 0 {
		version = slurmproto.Version2205
	}
	s := &Server{mode: mode, auth: a}
	switch mode {
	case ModeNoAuth:
		body, err := slurmproto.EncodeBody(version, slurmproto.PingSlurmdResponse{})
		if err != nil {
			return nil, err
		}
		cred := ""
		if version < replyUnsigned {
			if a == nil {
				return nil, fmt.Errorf("limitsrv: a %s reply is signed: no authenticator", slurmproto.ReleaseName(version))
			}
			payload := auth.Payload(version, uint16(slurmproto.ResponsePingSlurmd), body, auth.HashK12)
			if cred, err = a.Encode(ctx, payload, auth.UIDAny); err != nil {
				return nil, fmt.Errorf("limitsrv: credential of the canned reply: %w", err)
			}
		}
		s.canned = reply(version, pluginOf(a), cred, body)
	case ModeMunge, ModeSlurm:
		want := auth.PluginMunge
		if mode == ModeSlurm {
			want = auth.PluginSlurm
		}
		if a == nil || a.PluginID() != want {
			return nil, fmt.Errorf("limitsrv: mode %s needs an authenticator of auth plugin %d", mode, want)
		}
	default:
		return nil, fmt.Errorf("limitsrv: mode %q: want %q, %q or %q", mode, ModeNoAuth, ModeMunge, ModeSlurm)
	}
	addr, statsAddr := cfg.Addr, cfg.StatsAddr
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("limitsrv: %w", err)
	}
	s.ln = ln
	if statsAddr != "" {
		if s.stats, err = net.Listen("tcp", statsAddr); err != nil {
			ln.Close()
			return nil, fmt.Errorf("limitsrv: stats: %w", err)
		}
		s.wg.Add(1)
		go s.serveStats()
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the RPC listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// StatsAddr is the stats listener's address (nil without one).
func (s *Server) StatsAddr() net.Addr {
	if s.stats == nil {
		return nil
	}
	return s.stats.Addr()
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{
		Requests: s.requests.Load(), Failures: s.failures.Load(), HandleNS: s.handleNS.Load(),
		DecodeNS: s.decodeNS.Load(), EncodeNS: s.encodeNS.Load(),
		OpenConns: s.open.Load(), TotalConns: s.total.Load(),
	}
}

// Close stops accepting and waits for open connections to finish (each is bounded by
// connTimeout).
func (s *Server) Close() {
	s.closing.Store(true)
	s.ln.Close()
	if s.stats != nil {
		s.stats.Close()
	}
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: pause, as net/http does.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.total.Add(1)
		s.open.Add(1)
		s.wg.Add(1)
		go s.handle(c)
	}
}

func (s *Server) handle(c net.Conn) {
	defer s.wg.Done()
	defer s.open.Add(-1)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	frame, err := slurmproto.ReadFrame(c, maxRequest)
	if err != nil {
		if !isIdleClose(err) {
			s.failures.Add(1)
		}
		return
	}
	t0 := time.Now()
	out := s.canned
	if s.mode != ModeNoAuth {
		out, err = s.authReply(frame)
		if err != nil {
			s.failures.Add(1)
			return
		}
	}
	if _, err := c.Write(out); err != nil {
		s.failures.Add(1)
		return
	}
	s.handleNS.Add(int64(time.Since(t0)))
	s.requests.Add(1)
}

// isIdleClose reports a connection that went away (or timed out) without sending a frame:
// a held idle connection, not a failed request.
func isIdleClose(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &ne) && ne.Timeout())
}

// authReply is slurmd's REQUEST_PING path reduced to its authentication work: verify the
// request's credential and body hash, then sign the reply for the requester's uid (22.05;
// from 24.11 on replies go without credential).
func (s *Server) authReply(frame []byte) ([]byte, error) {
	m, err := slurmproto.DecodeMessage(frame)
	if err != nil {
		return nil, err
	}
	if m.Auth.PluginID != s.auth.PluginID() {
		return nil, fmt.Errorf("limitsrv: request auth plugin %d, want %d", m.Auth.PluginID, s.auth.PluginID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), connTimeout)
	defer cancel()
	t0 := time.Now()
	cred, err := s.auth.Decode(ctx, m.Auth.Cred)
	s.decodeNS.Add(int64(time.Since(t0)))
	if err != nil {
		return nil, err
	}
	if _, err := auth.CheckPayload(m.Header.Version, uint16(m.Header.MsgType), m.Body, cred.Payload, auth.HashPolicy{}); err != nil {
		return nil, err
	}
	body, err := slurmproto.EncodeBody(m.Header.Version, slurmproto.PingSlurmdResponse{})
	if err != nil {
		return nil, err
	}
	if m.Header.Version >= replyUnsigned {
		return reply(m.Header.Version, s.auth.PluginID(), "", body), nil
	}
	payload := auth.Payload(m.Header.Version, uint16(slurmproto.ResponsePingSlurmd), body, auth.HashK12)
	t1 := time.Now()
	rcred, err := s.auth.Encode(ctx, payload, cred.UID)
	s.encodeNS.Add(int64(time.Since(t1)))
	if err != nil {
		return nil, err
	}
	return reply(m.Header.Version, s.auth.PluginID(), rcred, body), nil
}

// reply is a RESPONSE_PING_SLURMD frame: signed with cred below 24.11, without an auth block
// (SLURM_NO_AUTH_CRED) from 24.11 on.
func reply(version uint16, plugin uint32, cred string, body []byte) []byte {
	h := slurmproto.Header{Version: version, MsgType: slurmproto.ResponsePingSlurmd}
	if version >= replyUnsigned {
		h.Flags |= slurmproto.FlagNoAuthCred
	}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: plugin, Cred: cred}, body)
}

// pluginOf is a's plugin id (munge without one).
func pluginOf(a auth.Authenticator) uint32 {
	if a == nil {
		return slurmproto.AuthPluginMunge
	}
	return a.PluginID()
}

func (s *Server) serveStats() {
	defer s.wg.Done()
	for {
		c, err := s.stats.Accept()
		if err != nil {
			return
		}
		_ = c.SetDeadline(time.Now().Add(connTimeout))
		b, _ := json.Marshal(s.Stats())
		_, _ = c.Write(append(b, '\n'))
		c.Close()
	}
}

// FetchStats reads a server's stats from its stats listener.
func FetchStats(addr string) (Stats, error) {
	var st Stats
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return st, fmt.Errorf("limitsrv: stats: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(connTimeout))
	if err := json.NewDecoder(c).Decode(&st); err != nil {
		return st, fmt.Errorf("limitsrv: stats: %w", err)
	}
	return st, nil
}
