package rpcserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// job is one complete request frame waiting for, or running on, a worker.
type job struct {
	frame    []byte         // owned copy of the request (no length prefix); handed to Serve
	peer     netip.AddrPort // captured on accept
	deadline time.Time      // accept + ConnTimeout
	// done runs on the worker after Serve returned (reply may be nil), or with expired=true
	// when the deadline passed while the job was queued (Serve not called). It must not block
	// for long: it only hands the reply to the connection's owner.
	done func(reply []byte, expired bool)
	// sent is the OnReplySent callback; set by Serve's goroutine, read by whoever writes
	// the reply after done (ordered by done's hand-off).
	sent     func(err error)
	reported atomic.Bool
	// probe, when set, makes this a liveness probe: the worker closes it
	// and runs nothing else.
	probe chan struct{}
}

// pool is the bounded worker pool shared by both server kinds: Workers goroutines draining a
// channel of QueueDepth jobs. Submission never blocks; a full queue is the caller's
// "overloaded" signal. All methods are safe from any goroutine.
type pool struct {
	d     Dispatcher
	log   hclog.Logger
	stats *counters
	base  context.Context // parent of every Serve ctx; cancelled by hardStop

	q    chan *job
	quit chan struct{} // closed by stop: idle workers exit
	wg   sync.WaitGroup

	// busy counts jobs accepted by trySubmit and not yet done (queued + running); Shutdown
	// waits for it to reach zero. Guarded by mu.
	mu   sync.Mutex
	busy int
}

func newPool(base context.Context, d Dispatcher, workers, depth int, st *counters, log hclog.Logger) *pool {
	p := &pool{
		d:     d,
		log:   log,
		stats: st,
		base:  base,
		q:     make(chan *job, depth),
		quit:  make(chan struct{}),
	}
	p.wg.Add(workers)
	for range workers {
		go p.worker()
	}
	return p
}

// trySubmit queues j without blocking; false means the pool and its queue are full. Any
// goroutine, including an event loop.
func (p *pool) trySubmit(j *job) bool {
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	p.stats.queued.Add(1)
	select {
	case p.q <- j:
		return true
	default:
		p.stats.queued.Add(-1)
		p.finish()
		return false
	}
}

func (p *pool) finish() {
	p.mu.Lock()
	p.busy--
	p.mu.Unlock()
}

// idle reports whether no job is queued or running. Any goroutine.
func (p *pool) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy == 0
}

// ErrPoolFull is Probe's error when the pool and its queue are full.
var ErrPoolFull = errors.New("rpcserver: every worker busy and the queue full")

// probe queues a no-op behind the requests already queued and waits, at
// most until ctx ends, for a worker to take it: the workers answer.
func (p *pool) probe(ctx context.Context) error {
	j := &job{probe: make(chan struct{})}
	if !p.trySubmit(j) {
		return ErrPoolFull
	}
	select {
	case <-j.probe:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rpcserver: no worker took a probe: %w", ctx.Err())
	}
}

// stop makes workers exit once they are idle; jobs still queued are dropped (their
// connections are closed by the server). Does not wait for running handlers.
func (p *pool) stop() { close(p.quit) }

func (p *pool) worker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.quit:
			return
		case j := <-p.q:
			p.stats.queued.Add(-1)
			if j.probe != nil {
				close(j.probe)
			} else {
				p.run(j)
			}
			p.finish()
		}
	}
}

func (p *pool) run(j *job) {
	if !time.Now().Before(j.deadline) || p.base.Err() != nil {
		if p.log.IsDebug() {
			p.log.Debug("request expired in queue", "peer", j.peer)
		}
		j.done(nil, true)
		return
	}
	ctx, cancel := context.WithDeadline(p.base, j.deadline)
	ctx = context.WithValue(ctx, sentKey{}, j)
	p.stats.inFlight.Add(1)
	reply := p.serve(ctx, j)
	p.stats.inFlight.Add(-1)
	cancel()
	j.done(reply, false)
}

// serve calls the Dispatcher, turning a panic into "no reply" so one bad request cannot kill
// the daemon.
func (p *pool) serve(ctx context.Context, j *job) (reply []byte) {
	defer func() {
		if r := recover(); r != nil {
			p.stats.panics.Add(1)
			p.log.Error("dispatcher panicked", "peer", j.peer, "panic", r, "stack", string(debug.Stack()))
			reply = nil
		}
	}()
	return p.d.Serve(ctx, j.frame, j.peer)
}
