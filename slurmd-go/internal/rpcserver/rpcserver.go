package rpcserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Named defaults and timeouts. Every wait in this package is bounded by one of these or by a
// caller's context.
const (
	// DefaultConnTimeout is Slurm's default MessageTimeout (10 s): the time a connection has,
	// from accept, to deliver its request frame and get its reply.
	DefaultConnTimeout = 10 * time.Second
	// HandlerTimeoutFactor sizes the default HandlerTimeout in ConnTimeouts.
	HandlerTimeoutFactor = 12
	// DefaultWorkers is the default size of the handler pool.
	DefaultWorkers = 128
	// DefaultQueueDepth is the default number of complete frames waiting for a worker.
	DefaultQueueDepth = 4096
	// DefaultMaxFrame is Slurm's MAX_MSG_SIZE (1 GiB, pack.h).
	DefaultMaxFrame uint32 = 1 << 30
	// maxLoops caps the default number of gnet event loops (style.md §7.11: 2-4 loops).
	maxLoops = 4
	// fdReserve is how many file descriptors the default MaxConns leaves to the rest of the
	// daemon (stepd sockets, spool files, munge) below RLIMIT_NOFILE.
	fdReserve = 256
	// minMaxConns is the floor of the derived MaxConns.
	minMaxConns = 64
	// sweepIntervalMin and sweepIntervalMax bound the deadline sweep period (ConnTimeout/10).
	sweepIntervalMin = 5 * time.Millisecond
	sweepIntervalMax = 250 * time.Millisecond
	// shutdownPoll is how often Shutdown re-checks that in-flight work has drained.
	shutdownPoll = 5 * time.Millisecond
	// engineStopTimeout bounds the wait for gnet's event loops to exit once Shutdown has drained.
	engineStopTimeout = 5 * time.Second
	// restartBackoffMin and restartBackoffMax bound the delay before the gnet engine is
	// restarted after it died on its own (see Server).
	restartBackoffMin = 50 * time.Millisecond
	restartBackoffMax = 5 * time.Second
	// acceptBackoffMin and acceptBackoffMax bound the NetServer's pause after a failed accept
	// (EMFILE/ENFILE), as net/http does.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// frameHeaderLen is the size of the big-endian u32 length prefix.
	frameHeaderLen = 4
	// readChunk is the NetServer's initial frame buffer for large frames; the buffer grows
	// with the bytes actually received, never straight to the advertised length.
	readChunk = 64 << 10
)

// ErrServerClosed is returned by Start on a server that has been shut down, and wrapped by
// Shutdown when called twice.
var ErrServerClosed = errors.New("rpcserver: server closed")

// ErrAlreadyStarted is returned by a second Start.
var ErrAlreadyStarted = errors.New("rpcserver: already started")

// Dispatcher handles one complete request frame. Implemented by the daemon.
type Dispatcher interface {
	// Serve runs on a pool worker (never on the event loop). frame is the request WITHOUT its
	// 4-byte length prefix and is owned by the callee. It returns the complete reply frame(s)
	// to write, already length-prefixed, or nil for "no reply". ctx carries the per-connection
	// deadline (Config.ConnTimeout from accept) and is cancelled on shutdown (once the
	// Shutdown context expires). The returned slice must not be modified after return.
	Serve(ctx context.Context, frame []byte, peer netip.AddrPort) []byte
	// Overloaded is called (on the loop for Server, on the connection goroutine for
	// NetServer; must not block, must be cheap) when the worker pool and its queue are full.
	// It returns the reply frame to send (e.g. a Slurm "busy" RC) or nil to just close. frame
	// is only valid during the call.
	Overloaded(frame []byte, peer netip.AddrPort) []byte
}

// Config configures both server kinds. The zero value of every field selects its default.
type Config struct {
	// Addr is "tcp://0.0.0.0:6818" or "host:port" (tcp, tcp4 and tcp6 schemes).
	Addr string
	// Loops is the number of gnet event loops (default min(4, GOMAXPROCS)); NetServer ignores it.
	Loops int
	// Workers is the bounded handler pool size (default DefaultWorkers).
	Workers int
	// QueueDepth is the number of complete frames waiting for a worker before Overloaded is
	// called. In-flight work is bounded by Workers + QueueDepth. 0 (the default) sizes it to
	// the connection cap, at least DefaultQueueDepth: a connection carries one request, so
	// an admitted request then always finds a slot and excess load waits in the kernel's
	// accept queue (backpressure) instead of being dropped.
	QueueDepth int
	// MaxFrame caps the request length (default DefaultMaxFrame). A longer length header is
	// logged (debug), counted in Stats.Oversize, answered with nothing and closed.
	MaxFrame uint32
	// ConnTimeout is Slurm's MessageTimeout (default DefaultConnTimeout): a connection that has
	// not delivered a full frame by accept+ConnTimeout is closed (Stats.Timeouts).
	ConnTimeout time.Duration
	// HandlerTimeout bounds a request once its frame is in: the ctx passed to Serve ends and
	// the connection is closed at dispatch+HandlerTimeout (default HandlerTimeoutFactor ×
	// ConnTimeout). Stock slurmd bounds no handler; a launch that forwards down a tree and
	// runs the Prolog needs several MessageTimeouts.
	HandlerTimeout time.Duration
	// MaxConns caps open connections; connections over the cap are closed right after accept
	// (Stats.Refused). 0 derives it from RLIMIT_NOFILE at Start (soft limit − 256, at least
	// 64) so that the server cannot exhaust the daemon's descriptors; < 0 disables the cap.
	MaxConns int
	// Logger is the parent logger (default: a null logger); the server logs as Named("rpcserver").
	Logger hclog.Logger
}

// withDefaults returns a copy of c with defaults filled in and validated.
func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		return c, errors.New("rpcserver: config: empty Addr")
	}
	if _, _, err := splitAddr(c.Addr); err != nil {
		return c, err
	}
	if c.Loops <= 0 {
		c.Loops = min(maxLoops, runtime.GOMAXPROCS(0))
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.QueueDepth < 0 {
		return c, fmt.Errorf("rpcserver: config: negative QueueDepth %d", c.QueueDepth)
	}
	// QueueDepth 0 stays 0 here: Start sizes the queue from the connection
	// cap (queueDepth), once that is resolved.
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.ConnTimeout <= 0 {
		c.ConnTimeout = DefaultConnTimeout
	}
	if c.HandlerTimeout <= 0 {
		c.HandlerTimeout = HandlerTimeoutFactor * c.ConnTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	c.Logger = c.Logger.Named("rpcserver")
	return c, nil
}

// resolveMaxConns turns the MaxConns setting into a cap (0 = unlimited).
func resolveMaxConns(setting int) int {
	switch {
	case setting > 0:
		return setting
	case setting < 0:
		return 0
	}
	soft, ok := nofileLimit()
	if !ok {
		return 0
	}
	return max(minMaxConns, soft-fdReserve)
}

// sweepInterval is the deadline sweep period for a given ConnTimeout.
func sweepInterval(connTimeout time.Duration) time.Duration {
	return min(max(connTimeout/10, sweepIntervalMin), sweepIntervalMax)
}

// splitAddr parses "scheme://host:port" or "host:port" into a net network and address.
func splitAddr(addr string) (network, hostport string, err error) {
	network, hostport = "tcp", addr
	if scheme, rest, ok := strings.Cut(addr, "://"); ok {
		network, hostport = scheme, rest
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return "", "", fmt.Errorf("rpcserver: config: unsupported network %q in Addr %q", network, addr)
	}
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return "", "", fmt.Errorf("rpcserver: config: Addr %q: %w", addr, err)
	}
	return network, hostport, nil
}

// peerOf converts a connection's remote address into a netip.AddrPort (IPv4-mapped addresses
// unmapped).
func peerOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// Listener is what the daemon and the bench need from either server kind.
type Listener interface {
	// Start binds and starts serving; it returns once the socket is listening.
	Start() error
	// Addr is the bound address (nil before Start).
	Addr() net.Addr
	// Shutdown stops accepting, lets in-flight handlers finish (bounded by ctx) and closes.
	Shutdown(ctx context.Context) error
	// Stats is a snapshot of the counters.
	Stats() Stats
	// Probe answers once a worker has taken a no-op queued behind the
	// waiting requests (liveness: the workers answer); an error if none
	// does before ctx ends, the queue is full, or the server is not running.
	Probe(ctx context.Context) error
}

// ErrNotServing is Probe's error before Start and after Shutdown.
var ErrNotServing = errors.New("rpcserver: not serving")

var (
	_ Listener = (*Server)(nil)
	_ Listener = (*NetServer)(nil)
)

// Stats is a snapshot of a server's counters. Gauges may be momentarily inconsistent with
// each other (they are read one by one).
type Stats struct {
	Open     int64  // gauge: open connections
	InFlight int64  // gauge: handlers running in Serve
	Queued   int64  // gauge: frames waiting for a worker
	Accepted uint64 // connections accepted
	Refused  uint64 // connections closed at accept (over MaxConns, or shutting down)
	Frames   uint64 // complete request frames read (served or rejected)
	Rejected uint64 // frames answered through Overloaded (pool and queue full)
	Oversize uint64 // connections closed for a length header over MaxFrame
	Timeouts uint64 // connections closed at accept+ConnTimeout (no full frame, or handler late)
	Panics   uint64 // Serve calls that panicked (recovered, no reply)
	Restarts uint64 // gnet engine restarts after it died on its own (Server only)
}

// counters are the live atomic counters behind Stats.
type counters struct {
	open, inFlight, queued                                          atomic.Int64
	accepted, refused, frames, rejected, oversize, timeouts, panics atomic.Uint64
	restarts                                                        atomic.Uint64
}

// admit counts a new connection unless the cap (max > 0) is reached. The compare-and-swap
// keeps the cap exact when several event loops open connections at once.
func (c *counters) admit(max int64) bool {
	for {
		n := c.open.Load()
		if max > 0 && n >= max {
			return false
		}
		if c.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Open:     c.open.Load(),
		InFlight: c.inFlight.Load(),
		Queued:   c.queued.Load(),
		Accepted: c.accepted.Load(),
		Refused:  c.refused.Load(),
		Frames:   c.frames.Load(),
		Rejected: c.rejected.Load(),
		Oversize: c.oversize.Load(),
		Timeouts: c.timeouts.Load(),
		Panics:   c.panics.Load(),
		Restarts: c.restarts.Load(),
	}
}

// queueDepth resolves Config.QueueDepth against the connection cap
// (0 = unlimited connections).
func queueDepth(configured int, maxConns int64) int {
	if configured > 0 {
		return configured
	}
	if maxConns <= 0 {
		return 16 * DefaultQueueDepth
	}
	return max(DefaultQueueDepth, int(maxConns))
}
