package rpcserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// NetServer is the plain net, goroutine-per-connection server with the same Dispatcher,
// Config, pool and semantics as Server. It exists so the bench can show what the event loop
// buys; Config.Loops is ignored. Each connection costs a goroutine (and its stack) for as long
// as it is open, idle or not.
type NetServer struct {
	cfg      Config
	d        Dispatcher
	log      hclog.Logger
	maxConns int64
	stats    counters

	base       context.Context
	cancelBase context.CancelFunc

	wg sync.WaitGroup // accept loop + connection goroutines

	mu       sync.Mutex              // guards the fields below
	started  bool                    // guarded by mu
	shutdown bool                    // guarded by mu
	ln       net.Listener            // guarded by mu
	pool     *pool                   // guarded by mu (set by Start)
	conns    map[net.Conn]*netConnSt // guarded by mu: open connections
}

// netConnSt is the per-connection state; phase is guarded by NetServer.mu.
type netConnSt struct {
	phase connPhase
}

// NewNetServer validates cfg and returns a goroutine-per-connection server that is not yet
// listening. Any goroutine.
func NewNetServer(cfg Config, d Dispatcher) (*NetServer, error) {
	if d == nil {
		return nil, fmt.Errorf("rpcserver: nil Dispatcher")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &NetServer{cfg: c, d: d, log: c.Logger.With("server", "net"), conns: make(map[net.Conn]*netConnSt)}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	return s, nil
}

// Start binds and starts the accept loop; it returns once listening. Any goroutine; once.
func (s *NetServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return ErrServerClosed
	}
	if s.started {
		return ErrAlreadyStarted
	}
	network, hostport, _ := splitAddr(s.cfg.Addr)
	ln, err := net.Listen(network, hostport)
	if err != nil {
		return fmt.Errorf("rpcserver: listen %s: %w", s.cfg.Addr, err)
	}
	s.started = true
	s.ln = ln
	s.maxConns = int64(resolveMaxConns(s.cfg.MaxConns))
	s.cfg.QueueDepth = queueDepth(s.cfg.QueueDepth, s.maxConns)
	s.pool = newPool(s.base, s.d, s.cfg.Workers, s.cfg.QueueDepth, &s.stats, s.log)
	s.wg.Add(1)
	go s.acceptLoop(ln, s.pool)
	s.log.Info("listening", "addr", ln.Addr().String(), "workers", s.cfg.Workers,
		"queue_depth", s.cfg.QueueDepth, "max_conns", s.maxConns, "conn_timeout", s.cfg.ConnTimeout)
	return nil
}

// Addr returns the bound address, or nil before Start. Any goroutine.
func (s *NetServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stats returns a snapshot of the counters. Any goroutine.
func (s *NetServer) Stats() Stats { return s.stats.snapshot() }

// Shutdown closes the listener, closes connections that have not delivered a frame, and waits
// for every connection goroutine (so every handler and reply write) to finish, or for ctx to
// expire; then it cancels the handlers' ctx, closes what is left and returns an error wrapping
// ctx.Err(). Any goroutine; a second call returns ErrServerClosed.
func (s *NetServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.shutdown = true
	if !s.started {
		s.mu.Unlock()
		s.cancelBase()
		return nil
	}
	_ = s.ln.Close()
	for c, st := range s.conns {
		if st.phase == phaseReading {
			_ = c.Close()
		}
	}
	p := s.pool
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("rpcserver: shutdown: %w", ctx.Err())
		s.cancelBase()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
	}
	s.cancelBase()
	p.stop()
	s.log.Info("stopped", "stats", fmt.Sprintf("%+v", s.Stats()))
	return err
}

func (s *NetServer) acceptLoop(ln net.Listener, p *pool) {
	defer s.wg.Done()
	backoff := time.Duration(0)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE/ENFILE and friends: back off instead of spinning, keep serving.
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			s.log.Warn("accept failed; backing off", "error", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-s.base.Done():
				return
			}
			continue
		}
		backoff = 0
		s.stats.accepted.Add(1)
		s.mu.Lock()
		if s.shutdown || !s.stats.admit(s.maxConns) {
			s.mu.Unlock()
			s.stats.refused.Add(1)
			_ = c.Close()
			continue
		}
		st := &netConnSt{}
		s.conns[c] = st
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, st, p)
	}
}

func (s *NetServer) serveConn(c net.Conn, st *netConnSt, p *pool) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
		s.stats.open.Add(-1)
	}()
	deadline := time.Now().Add(s.cfg.ConnTimeout)
	_ = c.SetDeadline(deadline)
	peer := peerOf(c.RemoteAddr())

	frame, err := s.readFrame(c, peer)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return
	}
	st.phase = phaseDispatched
	s.mu.Unlock()
	s.stats.frames.Add(1)
	// The frame is in: the handler's budget counts from now (see Config.HandlerTimeout).
	deadline = time.Now().Add(s.cfg.HandlerTimeout)
	_ = c.SetDeadline(deadline)

	// Further input on this connection is ignored: it is never read again.
	replyCh := make(chan []byte, 1)
	j := &job{frame: frame, peer: peer, deadline: deadline}
	// handoff: 0 waiting, 1 reply handed to this goroutine, 2 this goroutine left without
	// it (deadline, shutdown): then done itself reports the reply as not sent.
	var handoff atomic.Int32
	j.done = func(reply []byte, _ bool) {
		if handoff.CompareAndSwap(0, 1) {
			replyCh <- reply
			return
		}
		j.report(ErrNotSent)
	}
	if !p.trySubmit(j) {
		s.stats.rejected.Add(1)
		if reply := s.d.Overloaded(frame, peer); reply != nil {
			_, _ = c.Write(reply)
		}
		return
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	write := func(reply []byte) {
		if reply == nil {
			j.report(ErrNotSent)
			return
		}
		_, err := c.Write(reply)
		if err != nil && isTimeout(err) {
			s.stats.timeouts.Add(1)
		}
		j.report(err)
	}
	select {
	case reply := <-replyCh:
		write(reply)
	case <-timer.C:
		if !handoff.CompareAndSwap(0, 2) {
			write(<-replyCh) // the reply came at the deadline: it is on its way
			return
		}
		s.stats.timeouts.Add(1)
		if s.log.IsDebug() {
			s.log.Debug("handler late; closing", "peer", peer)
		}
	case <-s.base.Done():
		if !handoff.CompareAndSwap(0, 2) {
			write(<-replyCh)
		}
	}
}

// readFrame reads the length header and the frame, growing the buffer with the bytes
// actually received (a bare length header must not allocate MaxFrame).
func (s *NetServer) readFrame(c net.Conn, peer netip.AddrPort) ([]byte, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		s.readFailed(err, peer)
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > s.cfg.MaxFrame {
		s.stats.oversize.Add(1)
		if s.log.IsDebug() {
			s.log.Debug("frame over MaxFrame; closing", "peer", peer, "len", n, "max_frame", s.cfg.MaxFrame)
		}
		return nil, fmt.Errorf("rpcserver: frame length %d over %d", n, s.cfg.MaxFrame)
	}
	buf := make([]byte, 0, min(int(n), readChunk))
	for len(buf) < int(n) {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(2*cap(buf), int(n)))
			copy(nb, buf)
			buf = nb
		}
		m, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < int(n) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			s.readFailed(err, peer)
			return nil, err
		}
	}
	return buf, nil
}

func (s *NetServer) readFailed(err error, peer netip.AddrPort) {
	if isTimeout(err) {
		s.stats.timeouts.Add(1)
	}
	if s.log.IsDebug() {
		s.log.Debug("read failed", "peer", peer, "error", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Probe implements Listener.
func (s *NetServer) Probe(ctx context.Context) error {
	s.mu.Lock()
	p, ok := s.pool, s.started && !s.shutdown
	s.mu.Unlock()
	if !ok || p == nil {
		return ErrNotServing
	}
	return p.probe(ctx)
}
