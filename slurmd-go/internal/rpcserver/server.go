package rpcserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/panjf2000/gnet/v2"
)

// Server is the gnet (event-loop) RPC server. See the package documentation for the
// connection lifecycle.
//
// gnet v2.9.7 stops its whole engine when accept(2) fails with anything but EAGAIN, EINTR,
// ECONNRESET or ECONNABORTED (EMFILE/ENFILE included). Server therefore supervises the engine:
// if gnet.Run returns while the server is not shutting down, it is logged at error level,
// counted in Stats.Restarts and restarted on the same address with a backoff. MaxConns keeps
// the server's own connections from being the cause.
type Server struct {
	cfg      Config
	d        Dispatcher
	log      hclog.Logger
	maxConns int64 // resolved at Start; 0 = unlimited
	tick     time.Duration
	stats    counters
	h        *handler

	base       context.Context // parent of every Serve ctx
	cancelBase context.CancelFunc

	// stopping is set once by Shutdown; read on loops (OnOpen) and by the supervisor.
	stopping atomic.Bool
	stopCh   chan struct{} // closed by Shutdown: wakes the supervisor's backoff

	// loops maps gnet.EventLoop -> *loopState. Entries are added on the loop (OnOpen) and
	// read by the ticker goroutine; each loopState's fields are touched only on its loop.
	loops sync.Map

	mu       sync.Mutex    // guards the fields below
	started  bool          // guarded by mu
	shutdown bool          // guarded by mu: Shutdown was called
	eng      gnet.Engine   // guarded by mu: the running engine (zero between restarts)
	addr     net.Addr      // guarded by mu: bound address (resolved port)
	pool     *pool         // guarded by mu: set by Start
	booted   chan error    // guarded by mu: first OnBoot / first Run failure
	runDone  chan struct{} // closed when the supervisor exits (engine stopped for good)
}

// New validates cfg, fills in defaults and returns a server that is not yet listening.
// d must be non-nil. Any goroutine.
func New(cfg Config, d Dispatcher) (*Server, error) {
	if d == nil {
		return nil, fmt.Errorf("rpcserver: nil Dispatcher")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     c,
		d:       d,
		log:     c.Logger.With("server", "gnet"),
		tick:    sweepInterval(c.ConnTimeout),
		stopCh:  make(chan struct{}),
		runDone: make(chan struct{}),
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.h = &handler{s: s}
	return s, nil
}

// Start binds the listening socket, starts the workers and the event loops, and returns once
// the socket is listening. A bind failure (port taken, bad address) is returned wrapped
// ("rpcserver: listen ...: %w"). Start may be called once. Any goroutine.
func (s *Server) Start() error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.started {
		s.mu.Unlock()
		return ErrAlreadyStarted
	}
	s.started = true
	s.maxConns = int64(resolveMaxConns(s.cfg.MaxConns))
	s.cfg.QueueDepth = queueDepth(s.cfg.QueueDepth, s.maxConns)
	s.pool = newPool(s.base, s.d, s.cfg.Workers, s.cfg.QueueDepth, &s.stats, s.log)
	s.booted = make(chan error, 1)
	booted := s.booted
	s.mu.Unlock()

	network, hostport, _ := splitAddr(s.cfg.Addr) // validated in New
	go s.supervise(network + "://" + hostport)

	if err := <-booted; err != nil {
		s.pool.stop()
		return fmt.Errorf("rpcserver: listen %s: %w", s.cfg.Addr, err)
	}
	s.log.Info("listening", "addr", s.Addr().String(), "loops", s.cfg.Loops,
		"workers", s.cfg.Workers, "queue_depth", s.cfg.QueueDepth, "max_conns", s.maxConns,
		"conn_timeout", s.cfg.ConnTimeout)
	return nil
}

func (s *Server) options() []gnet.Option {
	return []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.cfg.Loops),
		gnet.WithTicker(true),
		gnet.WithReuseAddr(true), // as Slurm (SO_REUSEADDR); ReusePort stays off
		gnet.WithLogger(gnetLogger{s.log.Named("gnet")}),
		gnet.WithLockOSThread(false),
		gnet.WithEdgeTriggeredIO(false),
	}
}

// supervise runs gnet.Run until Shutdown, restarting the engine if it dies on its own.
func (s *Server) supervise(protoAddr string) {
	defer close(s.runDone)
	backoff := restartBackoffMin
	for first := true; ; first = false {
		err := gnet.Run(s.h, protoAddr, s.options()...)
		s.mu.Lock()
		s.eng = gnet.Engine{}
		booted := s.booted
		s.booted = nil
		s.mu.Unlock()
		if booted != nil { // Run failed before OnBoot: report it to Start.
			if err == nil {
				err = ErrServerClosed
			}
			booted <- err
			return
		}
		if s.stopping.Load() {
			return
		}
		s.stats.restarts.Add(1)
		s.log.Error("gnet engine exited unexpectedly; restarting", "error", err, "backoff", backoff)
		if first {
			// Restart on the resolved address so that a ":0" port is kept.
			protoAddr = s.restartAddr(protoAddr)
		}
		select {
		case <-s.stopCh:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartBackoffMax)
	}
}

func (s *Server) restartAddr(protoAddr string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ta, ok := s.addr.(*net.TCPAddr); ok && ta.Port != 0 {
		network, _, _ := splitAddr(protoAddr)
		host, _, _ := net.SplitHostPort(protoAddr[len(network)+3:])
		return network + "://" + net.JoinHostPort(host, fmt.Sprint(ta.Port))
	}
	return protoAddr
}

// Addr returns the bound address (with the real port when Addr asked for port 0), or nil
// before Start. Any goroutine.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stats returns a snapshot of the counters. Any goroutine.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// Shutdown stops accepting (new connections are closed on accept), closes connections that
// have not delivered a frame, waits until every queued and running handler has finished and
// its reply has been written (or ctx expires), then stops the event loops and closes the
// listening socket. If ctx expires first, the ctx of running handlers is cancelled, the loops
// are stopped anyway and the returned error wraps ctx.Err(). Any goroutine; a second call
// returns ErrServerClosed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.shutdown = true
	started := s.started
	p := s.pool
	s.mu.Unlock()
	s.stopping.Store(true)
	close(s.stopCh)
	if !started {
		s.cancelBase()
		return nil
	}
	s.log.Debug("shutting down", "open", s.stats.open.Load(), "busy", !p.idle())

	// Close idle (reading) connections on every loop; OnOpen now closes new ones.
	s.forEachLoop(func(ls *loopState) { ls.closeReading() })

	var err error
	tk := time.NewTicker(shutdownPoll)
	for !(p.idle() && s.stats.open.Load() == 0) {
		select {
		case <-ctx.Done():
			err = fmt.Errorf("rpcserver: shutdown: %w", ctx.Err())
			s.log.Debug("shutdown deadline passed; cancelling handlers",
				"in_flight", s.stats.inFlight.Load(), "queued", s.stats.queued.Load())
		case <-tk.C:
			continue
		}
		break
	}
	tk.Stop()
	s.cancelBase()

	s.mu.Lock()
	eng := s.eng
	s.mu.Unlock()
	stopCtx, cancel := context.WithTimeout(context.Background(), engineStopTimeout)
	defer cancel()
	if eng.Validate() == nil {
		// Engine.Stop polls every 500 ms for completion; run it aside and wait for Run
		// itself to return, which happens once the loops exited and the listener closed.
		go func() { _ = eng.Stop(stopCtx) }()
	}
	select {
	case <-s.runDone:
	case <-stopCtx.Done():
		if err == nil {
			err = fmt.Errorf("rpcserver: shutdown: gnet engine stop: %w", stopCtx.Err())
		}
	}
	p.stop()
	s.log.Info("stopped", "stats", fmt.Sprintf("%+v", s.Stats()))
	return err
}

// forEachLoop runs fn on each known event loop (asynchronously, on that loop).
func (s *Server) forEachLoop(fn func(*loopState)) {
	s.loops.Range(func(_, v any) bool {
		ls := v.(*loopState)
		_ = ls.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			fn(ls)
			return nil
		}))
		return true
	})
}

// connPhase is where a connection is in its lifecycle. Loop-only.
type connPhase uint8

const (
	phaseReading    connPhase = iota // waiting for the (rest of the) request frame
	phaseDispatched                  // frame handed to the pool; further input discarded
	phaseDraining                    // reply queued in gnet's outbound buffer; close when flushed
	phaseClosed                      // OnClose ran: touch nothing
)

// connState is a connection's Context. All fields are loop-only except c, ls (immutable).
type connState struct {
	c        gnet.Conn
	ls       *loopState
	peer     netip.AddrPort
	deadline time.Time
	phase    connPhase
	// prev/next link st into one of its loop's deadline FIFOs (list). A FIFO holds
	// deadlines made with one constant (accept+ConnTimeout while reading,
	// dispatch+HandlerTimeout once dispatched), so arrival order is deadline order: each
	// FIFO is sorted for free.
	prev, next *connState
	list       *fifo
}

// fifo is a deadline-ordered list of connections.
type fifo struct{ head, tail *connState }

// loopState is per event loop; every field is touched only on that loop.
type loopState struct {
	el gnet.EventLoop
	// reading holds connections until their frame is complete; dispatched holds them
	// while the handler runs and the reply drains.
	reading, dispatched fifo
	draining            map[*connState]struct{}
}

func (ls *loopState) push(l *fifo, st *connState) {
	st.prev, st.list = l.tail, l
	if l.tail != nil {
		l.tail.next = st
	} else {
		l.head = st
	}
	l.tail = st
}

func (ls *loopState) unlink(st *connState) {
	if l := st.list; l != nil {
		if st.prev != nil {
			st.prev.next = st.next
		} else if l.head == st {
			l.head = st.next
		}
		if st.next != nil {
			st.next.prev = st.prev
		} else if l.tail == st {
			l.tail = st.prev
		}
	}
	st.prev, st.next, st.list = nil, nil, nil
	delete(ls.draining, st)
}

// close closes st's connection now (on its loop) and makes sure it is unlinked even if gnet
// considered it stale.
func (ls *loopState) close(st *connState) {
	_ = ls.el.Close(st.c)
	if st.phase != phaseClosed {
		st.phase = phaseClosed
		ls.unlink(st)
	}
}

// closeReading closes every connection that has not delivered its frame (Shutdown).
func (ls *loopState) closeReading() {
	for st := ls.reading.head; st != nil; {
		next := st.next
		if st.phase == phaseReading {
			ls.close(st)
		}
		st = next
	}
}

// handler is the gnet.EventHandler; kept apart so Server's API has no gnet callbacks.
type handler struct {
	gnet.BuiltinEventEngine
	s *Server
}

// OnBoot runs once per engine start, before the loops run; the socket is bound and listening.
func (h *handler) OnBoot(eng gnet.Engine) gnet.Action {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping.Load() {
		return gnet.Shutdown
	}
	s.eng = eng
	s.loops.Clear() // loops of a previous (dead) engine
	if s.addr == nil {
		s.addr = boundAddr(eng, s.cfg.Addr)
	}
	if s.booted != nil {
		s.booted <- nil
		s.booted = nil
	}
	return gnet.None
}

func boundAddr(eng gnet.Engine, cfgAddr string) net.Addr {
	if fd, err := eng.Dup(); err == nil {
		a, err := sockname(fd)
		closeFD(fd)
		if err == nil {
			return a
		}
	}
	network, hostport, _ := splitAddr(cfgAddr)
	if a, err := net.ResolveTCPAddr(network, hostport); err == nil {
		return a
	}
	return nil
}

func (h *handler) loop(el gnet.EventLoop) *loopState {
	if v, ok := h.s.loops.Load(el); ok {
		return v.(*loopState)
	}
	ls := &loopState{el: el, draining: make(map[*connState]struct{})}
	v, _ := h.s.loops.LoadOrStore(el, ls)
	return v.(*loopState)
}

// OnOpen registers the connection in its loop's deadline FIFO. No goroutine, no timer.
func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	s := h.s
	s.stats.accepted.Add(1)
	if s.stopping.Load() || !s.stats.admit(s.maxConns) {
		s.stats.refused.Add(1)
		if s.log.IsDebug() {
			s.log.Debug("connection refused", "peer", c.RemoteAddr(), "shutting_down", s.stopping.Load())
		}
		return nil, gnet.Close
	}
	ls := h.loop(c.EventLoop())
	st := &connState{
		c:        c,
		ls:       ls,
		peer:     peerOf(c.RemoteAddr()),
		deadline: time.Now().Add(s.cfg.ConnTimeout),
	}
	ls.push(&ls.reading, st)
	c.SetContext(st)
	return nil, gnet.None
}

// OnClose marks the connection closed so that late callbacks leave it alone.
func (h *handler) OnClose(c gnet.Conn, _ error) gnet.Action {
	st, ok := c.Context().(*connState)
	if !ok || st.phase == phaseClosed {
		return gnet.None
	}
	st.phase = phaseClosed
	st.ls.unlink(st)
	c.SetContext(nil)
	h.s.stats.open.Add(-1)
	return gnet.None
}

// OnTraffic frames the request: Peek the length, wait for the whole frame, copy it, hand it
// off. Never blocks; touches nothing but gnet's own buffers.
func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	s := h.s
	st, ok := c.Context().(*connState)
	if !ok {
		_, _ = c.Discard(-1)
		return gnet.Close
	}
	if st.phase != phaseReading {
		// One request per connection: anything after the first frame is ignored.
		_, _ = c.Discard(-1)
		return gnet.None
	}
	hdr, err := c.Peek(frameHeaderLen)
	if err != nil {
		return gnet.None // short: wait for more
	}
	n := binary.BigEndian.Uint32(hdr)
	if n > s.cfg.MaxFrame {
		s.stats.oversize.Add(1)
		if s.log.IsDebug() {
			s.log.Debug("frame over MaxFrame; closing", "peer", st.peer, "len", n, "max_frame", s.cfg.MaxFrame)
		}
		_, _ = c.Discard(-1)
		return gnet.Close
	}
	total := frameHeaderLen + int(n)
	if c.InboundBuffered() < total {
		return gnet.None
	}
	buf, err := c.Peek(total)
	if err != nil {
		return gnet.None
	}
	// Copy before handoff: Peek's bytes live in the loop's shared read buffer (pitfall 1).
	frame := make([]byte, n)
	copy(frame, buf[frameHeaderLen:])
	_, _ = c.Discard(-1) // the frame and anything after it
	st.phase = phaseDispatched
	s.stats.frames.Add(1)
	// The frame is in: from now on the handler's budget counts, not the read deadline
	// (a launch that forwards and runs a Prolog may take several MessageTimeouts).
	ls := st.ls
	ls.unlink(st)
	st.deadline = time.Now().Add(s.cfg.HandlerTimeout)
	ls.push(&ls.dispatched, st)

	j := &job{frame: frame, peer: st.peer, deadline: st.deadline}
	j.done = func(reply []byte, _ bool) { s.complete(st, j, reply) }
	if s.pool.trySubmit(j) {
		return gnet.None
	}
	s.stats.rejected.Add(1)
	if s.log.IsDebug() {
		s.log.Debug("pool full; overloaded", "peer", st.peer)
	}
	if reply := s.d.Overloaded(frame, st.peer); reply != nil {
		_, _ = c.Write(reply) // gnet flushes what is buffered before closing
	}
	return gnet.Close
}

// complete runs on a worker: write the reply (or close) through the loop, and tell j's
// OnReplySent callback how it went.
func (s *Server) complete(st *connState, j *job, reply []byte) {
	c, ls := st.c, st.ls
	if reply == nil {
		j.report(ErrNotSent)
		_ = ls.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			if st.phase != phaseClosed {
				ls.close(st)
			}
			return nil
		}))
		return
	}
	err := c.AsyncWrite(reply, func(c gnet.Conn, err error) error {
		// On the loop. err != nil: the connection is already gone (pitfall 5).
		if err != nil || st.phase == phaseClosed {
			if err == nil {
				err = ErrNotSent
			}
			j.report(err)
			return nil
		}
		j.report(nil)
		if c.OutboundBuffered() == 0 {
			ls.close(st)
			return nil
		}
		// The kernel send buffer is full: close once gnet has flushed (sweep), or at the
		// deadline. Closing now would drop the tail of the reply.
		st.phase = phaseDraining
		ls.draining[st] = struct{}{}
		return nil
	})
	if err != nil {
		j.report(err)
		if s.log.IsDebug() {
			s.log.Debug("reply not queued", "peer", st.peer, "error", err)
		}
	}
}

// OnTick runs on gnet's ticker goroutine: schedule a deadline sweep on every loop.
func (h *handler) OnTick() (time.Duration, gnet.Action) {
	s := h.s
	now := time.Now()
	stopping := s.stopping.Load()
	s.forEachLoop(func(ls *loopState) {
		if stopping {
			// Catches a connection whose loop was first seen after Shutdown's own pass.
			ls.closeReading()
		}
		s.sweep(ls, now)
	})
	return s.tick, gnet.None
}

// sweep closes, on its loop, connections past their deadline and drained replies.
func (s *Server) sweep(ls *loopState, now time.Time) {
	for _, l := range []*fifo{&ls.reading, &ls.dispatched} {
		for st := l.head; st != nil && !now.Before(st.deadline); st = l.head {
			s.stats.timeouts.Add(1)
			if s.log.IsDebug() {
				s.log.Debug("connection timed out", "peer", st.peer, "phase", st.phase)
			}
			ls.close(st)
		}
	}
	for st := range ls.draining {
		if st.c.OutboundBuffered() == 0 {
			ls.close(st)
		}
	}
}

// Probe implements Listener.
func (s *Server) Probe(ctx context.Context) error {
	s.mu.Lock()
	p, ok := s.pool, s.started && !s.shutdown
	s.mu.Unlock()
	if !ok || p == nil {
		return ErrNotServing
	}
	return p.probe(ctx)
}
