package stepio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Timeouts and bounds of one client connection.
const (
	// DefaultDialTimeout bounds connect plus the init message write
	// (slurm.conf MessageTimeout's default).
	DefaultDialTimeout = 10 * time.Second
	// DefaultStallTimeout is how long a client's socket may accept no
	// output before the client is dropped. Stock slurmstepd waits forever,
	// so one stuck srun or sattach stalls every task of the step; we keep
	// the back-pressure (a paused terminal still blocks the tasks) but end
	// it after this long so a dead peer cannot hold the step hostage.
	DefaultStallTimeout = 5 * time.Minute
	// DefaultPeerCloseWait is how long an orderly close waits, after our
	// half-close, for the peer to close its side. srun closes once it has
	// counted every EOF; waiting keeps our close from turning into a reset
	// that could discard output still unread on its side.
	DefaultPeerCloseWait = 5 * time.Second

	// ClientQueueFrames bounds each client's output queue.
	ClientQueueFrames = 64
	// writeBatchFrames is how many queued frames one writev carries.
	writeBatchFrames = 16
	// MaxClientQueuedBytes bounds the frame bytes held for one client: a
	// full queue plus the batch being written.
	MaxClientQueuedBytes = (ClientQueueFrames + writeBatchFrames) * MaxFrameLen
)

// Client errors.
var (
	ErrClientGone = errors.New("stepio: client connection gone")
	ErrClosed     = errors.New("stepio: closed")
	ErrTimeout    = errors.New("stepio: timed out")
	errAborted    = errors.New("stepio: client closed")
)

// FrameHandler receives every frame a client reads from its peer, on that
// client's reader goroutine. payload aliases a buffer reused for the next
// frame: copy it to keep it. A handler that blocks stops the reads from that
// peer (back-pressure on its stdin), nothing else.
type FrameHandler func(c *Client, h Header, payload []byte)

// Client is one I/O connection to an srun or sattach: an output queue of at
// most ClientQueueFrames frames drained by a writer goroutine, and a reader
// goroutine that hands incoming frames to a FrameHandler.
type Client struct {
	conn net.Conn
	log  hclog.Logger
	init InitMsg

	// Set before Start, read-only afterwards.
	stall     time.Duration
	peerWait  time.Duration
	handler   FrameHandler
	onDrop    func(*Client, error)
	gauge     *byteGauge
	preload   [][]byte // written before the queue; owned by the writer once started
	initial   bool     // attached before the mux started (see Task.StdoutLocal)
	writeBufs net.Buffers

	queue    chan []byte
	finish   chan struct{} // closed by Shutdown: write what is queued, then stop
	abort    chan struct{} // closed by Close or on a protocol error
	stopped  chan struct{} // closed when the writer stopped; Send fails from then on
	readDone chan struct{} // closed when the reader goroutine returned

	startOnce, finishOnce, abortOnce sync.Once

	mu      sync.Mutex
	werr    error // guarded by mu: why the writer stopped (nil: clean flush)
	failErr error // guarded by mu: protocol error found by the reader
}

// Dial connects to an srun (or sattach) I/O port and sends init, both within
// timeout (DefaultDialTimeout if 0) and ctx. The client is idle until Start.
// Any goroutine.
func Dial(ctx context.Context, addr string, init InitMsg, timeout time.Duration, logger hclog.Logger) (*Client, error) {
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	msg, err := init.Marshal()
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("stepio: connect %s: %w", addr, err)
	}
	// The init write is the only thing that can stall here; bound it with
	// the same budget as the connect.
	if err := conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("stepio: %s: %w", addr, err)
	}
	if _, err := conn.Write(msg); err != nil {
		conn.Close()
		return nil, fmt.Errorf("stepio: send init to %s: %w", addr, err)
	}
	if err := conn.SetWriteDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("stepio: %s: %w", addr, err)
	}
	return newClient(conn, init, logger.With("peer", addr)), nil
}

func newClient(conn net.Conn, init InitMsg, logger hclog.Logger) *Client {
	return &Client{
		conn:     conn,
		log:      logger,
		init:     init,
		stall:    DefaultStallTimeout,
		peerWait: DefaultPeerCloseWait,
		gauge:    &byteGauge{},
		queue:    make(chan []byte, ClientQueueFrames),
		finish:   make(chan struct{}),
		abort:    make(chan struct{}),
		stopped:  make(chan struct{}),
		readDone: make(chan struct{}),
	}
}

// SetStallTimeout overrides DefaultStallTimeout. Call before Start.
func (c *Client) SetStallTimeout(d time.Duration) {
	if d > 0 {
		c.stall = d
	}
}

// Init is the init message that was sent. Any goroutine.
func (c *Client) Init() InitMsg { return c.init }

// RemoteAddr is the peer's address. Any goroutine.
func (c *Client) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// Start launches the reader and writer goroutines. h receives incoming
// frames; nil means the stand-alone behaviour: echo CONNECTION_TEST back to
// this client and ignore stdin. Only the first call has an effect; a Start
// after Close does nothing. Any goroutine.
func (c *Client) Start(h FrameHandler) {
	c.startOnce.Do(func() {
		if h == nil {
			h = echoConnectionTest
		}
		c.handler = h
		go c.writeLoop()
		go c.readLoop()
	})
}

// Send queues one encoded frame (see AppendFrame). It blocks while the queue
// is full, which is how a slow peer pushes back on the tasks; the wait ends
// when the writer makes room or drops the client, at the latest after the
// stall timeout. The frame must not be modified afterwards. Returns
// ErrClientGone once the client stopped. Any goroutine.
func (c *Client) Send(frame []byte) error {
	select {
	case <-c.stopped:
		return ErrClientGone
	case <-c.abort:
		return ErrClientGone
	default:
	}
	select {
	case c.queue <- frame:
		c.gauge.add(int64(len(frame)))
		// The writer may have stopped between the checks; then nobody
		// would ever take this frame, so take it back.
		select {
		case <-c.stopped:
			c.reclaim()
		default:
		}
		return nil
	case <-c.stopped:
		return ErrClientGone
	case <-c.abort:
		return ErrClientGone
	}
}

// Done is closed when the client no longer takes frames (flushed by
// Shutdown, dropped, or closed). Any goroutine.
func (c *Client) Done() <-chan struct{} { return c.stopped }

// Err is why the client stopped: nil while running and after a clean
// Shutdown. Any goroutine.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failErr != nil {
		return c.failErr
	}
	if errors.Is(c.werr, errAborted) {
		return nil
	}
	return c.werr
}

// Shutdown closes the connection in order: write everything queued, half-
// close (srun reads up to our FIN), wait for the peer to close its side (at
// most the peer-close wait), close. Everything within timeout; past it the
// connection is closed hard and ErrTimeout returned. Frames sent during
// Shutdown may be lost. Any goroutine.
func (c *Client) Shutdown(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c.Start(nil) // a never-started client still flushes its preload and queue
	c.finishOnce.Do(func() { close(c.finish) })
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.stopped:
	case <-t.C:
		c.Close()
		return fmt.Errorf("stepio: flush to %s: %w", c.conn.RemoteAddr(), ErrTimeout)
	}
	if err := c.Err(); err != nil {
		c.Close()
		return err
	}
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			c.log.Debug("half-close failed", "error", err)
		}
	}
	wait := time.Until(deadline)
	if wait > c.peerWait {
		wait = c.peerWait
	}
	pt := time.NewTimer(wait)
	defer pt.Stop()
	select {
	case <-c.readDone:
	case <-pt.C:
		c.log.Debug("peer did not close its side in time", "wait", wait)
	}
	return c.Close()
}

// Close closes the connection now, dropping queued frames. Idempotent; any
// goroutine.
func (c *Client) Close() error {
	var err error
	c.abortOnce.Do(func() {
		close(c.abort)
		err = c.conn.Close()
	})
	// Never started: nothing will close these otherwise.
	c.startOnce.Do(func() {
		c.setWriteErr(errAborted)
		close(c.stopped)
		close(c.readDone)
	})
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("stepio: close %s: %w", c.conn.RemoteAddr(), err)
	}
	return nil
}

// fail drops the client after a protocol error seen by the reader.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.failErr == nil {
		c.failErr = err
	}
	c.mu.Unlock()
	c.Close()
}

func (c *Client) setWriteErr(err error) {
	c.mu.Lock()
	c.werr = err
	c.mu.Unlock()
}

// reclaim empties the queue after the writer stopped, keeping the gauge
// exact. Safe from several goroutines: each frame is taken once.
func (c *Client) reclaim() {
	for {
		select {
		case f := <-c.queue:
			c.gauge.add(-int64(len(f)))
		default:
			return
		}
	}
}

func (c *Client) writeLoop() {
	err := c.writeFrames()
	c.mu.Lock()
	if errors.Is(err, errAborted) && c.failErr != nil {
		err = c.failErr
	}
	c.werr = err
	c.mu.Unlock()
	close(c.stopped)
	c.reclaim()
	if err == nil || errors.Is(err, errAborted) {
		return
	}
	c.log.Warn("dropping I/O client", "error", err)
	c.Close()
	if c.onDrop != nil {
		c.onDrop(c, err)
	}
}

func (c *Client) writeFrames() error {
	for len(c.preload) > 0 {
		n := min(len(c.preload), writeBatchFrames)
		if err := c.write(c.preload[:n]); err != nil {
			return err
		}
		c.preload = c.preload[n:]
	}
	c.preload = nil
	batch := make([][]byte, 0, writeBatchFrames)
	for {
		select {
		case f := <-c.queue:
			batch = c.gather(append(batch[:0], f))
			if err := c.writeQueued(batch); err != nil {
				return err
			}
		case <-c.finish:
			for {
				batch = c.gather(batch[:0])
				if len(batch) == 0 {
					return nil
				}
				if err := c.writeQueued(batch); err != nil {
					return err
				}
			}
		case <-c.abort:
			return errAborted
		}
	}
}

// gather appends frames already queued, without waiting, up to a batch.
func (c *Client) gather(batch [][]byte) [][]byte {
	for len(batch) < writeBatchFrames {
		select {
		case f := <-c.queue:
			batch = append(batch, f)
		default:
			return batch
		}
	}
	return batch
}

func (c *Client) writeQueued(batch [][]byte) error {
	err := c.write(batch)
	var n int64
	for _, f := range batch {
		n += int64(len(f))
	}
	c.gauge.add(-n)
	return err
}

// write sends a batch with one writev, bounded by the stall timeout. A
// timed-out write may have sent part of a frame, so the client is dropped.
func (c *Client) write(batch [][]byte) error {
	select {
	case <-c.abort:
		return errAborted
	default:
	}
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return fmt.Errorf("stepio: set write deadline: %w", err)
	}
	// WriteTo consumes the Buffers it is given; hand it a copy of the
	// slice headers so shared frames and the batch stay intact.
	c.writeBufs = append(c.writeBufs[:0], batch...)
	if _, err := c.writeBufs.WriteTo(c.conn); err != nil {
		select {
		case <-c.abort:
			return errAborted
		default:
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("stepio: client accepted no output for %s: %w", c.stall, err)
		}
		return fmt.Errorf("stepio: write: %w", err)
	}
	return nil
}

func (c *Client) readLoop() {
	defer close(c.readDone)
	br := bufio.NewReaderSize(c.conn, 2*MaxFrameLen)
	buf := make([]byte, MaxMsgLen)
	for {
		h, p, err := ReadFrame(br, buf)
		if err != nil {
			select {
			case <-c.abort:
				return // we closed the connection
			default:
			}
			if errors.Is(err, ErrFrameTooLong) {
				// Stock reads past its buffer here; we cannot find the
				// next header, so drop the client.
				c.log.Error("bad frame from I/O client", "error", err)
				c.fail(err)
				return
			}
			// The peer closed its side (srun does after the last EOF)
			// or the connection broke. Output continues (stock); a
			// broken connection shows up on the next write.
			c.log.Debug("I/O client read side ended", "error", err)
			return
		}
		c.handler(c, h, p)
	}
}

// connTestFrame is the stepd's answer to a CONNECTION_TEST: the same empty
// frame with task ids 0 (io.c _build_connection_okay_message).
var connTestFrame = Header{Type: TypeConnectionTest}.Append(nil)

func echoConnectionTest(c *Client, h Header, _ []byte) {
	if h.Type == TypeConnectionTest && h.Length == 0 {
		_ = c.Send(connTestFrame)
	}
}

// byteGauge counts frame bytes held in client queues and their high-water
// mark.
type byteGauge struct {
	cur, max atomic.Int64
}

func (g *byteGauge) add(n int64) {
	v := g.cur.Add(n)
	for n > 0 {
		m := g.max.Load()
		if v <= m || g.max.CompareAndSwap(m, v) {
			return
		}
	}
}
