// Package limitsrv holds the two limit servers the bench drives with the same client as the
// real daemons. Both speak just enough of the Slurm protocol to answer REQUEST_PING
// (connection per RPC, one goroutine per connection, plain net):
//
//   - ModeNoAuth reads a request frame and writes a canned RESPONSE_PING_SLURMD without
//     looking at it: the machine's connection-per-RPC ceiling.
//   - ModeMunge decodes the request's credential through munged, checks the body hash as
//     slurmd does, encodes the reply's credential through munged and writes the reply: the
//     ceiling of any daemon that authenticates every RPC with munge.
//
// A stats listener answers each connection with one JSON line (Stats), so the bench can
// measure the share of each request spent waiting for munged.
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
)

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
	DecodeNS   int64 `json:"decode_ns"`   // inside munged decode (ModeMunge)
	EncodeNS   int64 `json:"encode_ns"`   // inside munged encode (ModeMunge)
	OpenConns  int64 `json:"open_conns"`  // connections open now
	TotalConns int64 `json:"total_conns"` // connections accepted
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

// New starts a server in mode on addr (and a stats listener on statsAddr, if not empty). a
// makes and checks credentials; in ModeNoAuth it is used once, at start, for the canned
// reply's credential.
func New(ctx context.Context, mode Mode, addr, statsAddr string, a auth.Authenticator) (*Server, error) {
	s := &Server{mode: mode, auth: a}
	switch mode {
	case ModeNoAuth:
		body, err := slurmproto.EncodeBody(slurmproto.Version2205, slurmproto.PingSlurmdResponse{})
		if err != nil {
			return nil, err
		}
		payload := auth.Payload(slurmproto.Version2205, uint16(slurmproto.ResponsePingSlurmd), body, auth.HashK12)
		cred, err := a.Encode(ctx, payload, auth.UIDAny)
		if err != nil {
			return nil, fmt.Errorf("limitsrv: credential of the canned reply: %w", err)
		}
		s.canned = reply(slurmproto.Version2205, cred, body)
	case ModeMunge:
	default:
		return nil, fmt.Errorf("limitsrv: mode %q: want %q or %q", mode, ModeNoAuth, ModeMunge)
	}
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
	if s.mode == ModeMunge {
		out, err = s.mungeReply(frame)
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

// mungeReply is slurmd's REQUEST_PING path reduced to its munge work: verify the request's
// credential and body hash, then sign the reply for the requester's uid.
func (s *Server) mungeReply(frame []byte) ([]byte, error) {
	m, err := slurmproto.DecodeMessage(frame)
	if err != nil {
		return nil, err
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
	payload := auth.Payload(m.Header.Version, uint16(slurmproto.ResponsePingSlurmd), body, auth.HashK12)
	t1 := time.Now()
	rcred, err := s.auth.Encode(ctx, payload, cred.UID)
	s.encodeNS.Add(int64(time.Since(t1)))
	if err != nil {
		return nil, err
	}
	return reply(m.Header.Version, rcred, body), nil
}

func reply(version uint16, cred string, body []byte) []byte {
	h := slurmproto.Header{Version: version, MsgType: slurmproto.ResponsePingSlurmd}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, body)
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
