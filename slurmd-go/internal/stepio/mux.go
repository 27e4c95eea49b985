package stepio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Step-level timeouts and bounds.
const (
	// DefaultWaitTimeout bounds Wait when the caller passes 0: stock
	// abandons a step's I/O 60 s after shutdown starts
	// (DEFAULT_EIO_SHUTDOWN_WAIT, slurm.conf EioTimeout).
	DefaultWaitTimeout = 60 * time.Second
	// abandonWait bounds how long Close waits for the mux's goroutines
	// after closing everything they block on.
	abandonWait = 5 * time.Second
	// StockReplayFrames is how many recent output frames stock replays to a
	// newly attached sattach (STDIO_MAX_MSG_CACHE).
	StockReplayFrames = 128
	// StdinQueueFrames bounds the stdin frames queued per task; a task that
	// does not read its stdin pushes back on the client that sends it.
	StdinQueueFrames = 16
)

// ErrNotStarted is returned by Wait before Start.
var ErrNotStarted = errors.New("stepio: mux not started")

// Task is one local task's standard streams as the mux sees them.
type Task struct {
	GTaskID uint16 // global task id, header gtaskid
	LTaskID uint16 // local task id on this node, header ltaskid

	// Stdout and Stderr are read until EOF (any read error counts as EOF,
	// as in stock: a PTY master reports EIO once the task is gone) and
	// forwarded as STDOUT/STDERR frames, then one EOF frame each. nil means
	// not forwarded (output to a file, /dev/null, or stderr sharing the
	// --pty terminal): no frames, no EOF, not counted in the init message.
	// The mux owns them and closes those that are io.Closers.
	Stdout, Stderr io.Reader

	// StdoutLocal/StderrLocal, when set, take the stream's data instead of
	// the clients attached before Start; those still get its EOF frame and
	// count it. This is stock's LAUNCH_LABEL_IO with output files: the
	// stepd writes (and labels) the file, srun only sees the EOFs. Clients
	// attached after Start (sattach) get the data too, as in stock.
	StdoutLocal, StderrLocal io.Writer

	// Stdin takes the payload of STDIN frames for GTaskID and of every
	// ALLSTDIN frame; an empty frame closes it. nil discards them (stdin is
	// a file or /dev/null). The mux owns it and closes it at the latest in
	// Wait or Close. With a PTY pass a dup of the master, else closing
	// stdin would end the output too.
	Stdin io.WriteCloser
}

// Config describes one step's I/O on this node.
type Config struct {
	Tasks []Task
	// LineBuffered (LAUNCH_BUFFERED_IO) forwards whole lines only: as many
	// as fit a frame, a full frame of a longer line, the rest at EOF.
	// Otherwise every read is forwarded as it comes.
	LineBuffered bool
	// StallTimeout: a client whose socket accepts no output this long is
	// dropped (DefaultStallTimeout if 0).
	StallTimeout time.Duration
	// DialTimeout bounds connect plus init per client (DefaultDialTimeout if 0).
	DialTimeout time.Duration
	// PeerCloseWait bounds the wait for a peer's close after our
	// half-close (DefaultPeerCloseWait if 0).
	PeerCloseWait time.Duration
	// ReplayFrames is how many recent output frames a client attached after
	// Start receives first. 0: output from attach time on; stock replays
	// StockReplayFrames.
	ReplayFrames int
}

// Stats is a snapshot of the mux's buffering.
type Stats struct {
	Clients        int   // attached and not dropped
	Dropped        int   // clients dropped for errors or stalls
	QueuedBytes    int64 // frame bytes in client queues now
	MaxQueuedBytes int64 // high-water mark of QueuedBytes
}

// Mux forwards the stdio of one step's local tasks to every attached client
// (srun first, sattach later) and routes their stdin back.
//
//	New ── Attach(srun) ── Start ──> streams run; Attach(sattach)...
//	    ── Wait: all EOFs sent ─> stdin closed ─> per client: flush,
//	             half-close, wait peer close ─> Close
//	    ── Close (any time): drop everything now
//
// Each output stream has one goroutine that reads, frames and hands the
// frame to every client's bounded queue, blocking while a queue is full;
// that is the back-pressure on the task. With no client left the output is
// read and discarded, so tasks never block on a dead srun.
type Mux struct {
	cfg        Config
	log        hclog.Logger
	gauge      byteGauge
	streams    []*stream
	stdins     []*stdinSink
	byGTID     map[uint16]*stdinSink
	nout, nerr uint32

	outputDone chan struct{} // closed when every stream sent its EOF
	stdinStop  chan struct{} // closed when stdin forwarding ends
	streamWG   sync.WaitGroup
	stdinWG    sync.WaitGroup

	stdinStopOnce, closeOnce sync.Once
	closeErr                 error // written once in Close

	mu      sync.Mutex
	started bool      // guarded by mu
	closing bool      // guarded by mu: Attach refused
	clients []*Client // guarded by mu
	cache   frameRing // guarded by mu
	dropped int       // guarded by mu
}

// stream is one task output stream and its goroutine's state.
type stream struct {
	typ         MsgType
	gtid, ltid  uint16
	r           io.Reader
	local       io.Writer
	localBroken bool      // stream goroutine only
	targets     []*Client // stream goroutine only: reused per frame
	eofSent     bool      // guarded by Mux.mu
	closeOnce   sync.Once
}

// stdinSink is one task's stdin and its queue.
type stdinSink struct {
	gtid      uint16
	w         io.WriteCloser
	q         chan []byte
	closed    bool // stdin goroutine only
	closeOnce sync.Once
}

// New builds the mux for cfg. Nothing runs until Start; attach the initial
// srun before Start so it misses no output. logger may be nil.
func New(cfg Config, logger hclog.Logger) (*Mux, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.PeerCloseWait <= 0 {
		cfg.PeerCloseWait = DefaultPeerCloseWait
	}
	if cfg.ReplayFrames < 0 {
		cfg.ReplayFrames = 0
	}
	m := &Mux{
		cfg:        cfg,
		log:        logger.Named("stepio"),
		byGTID:     make(map[uint16]*stdinSink),
		outputDone: make(chan struct{}),
		stdinStop:  make(chan struct{}),
		cache:      frameRing{buf: make([][]byte, cfg.ReplayFrames)},
	}
	seen := make(map[uint16]bool, len(cfg.Tasks))
	for _, t := range cfg.Tasks {
		if seen[t.GTaskID] {
			return nil, fmt.Errorf("stepio: task %d listed twice", t.GTaskID)
		}
		seen[t.GTaskID] = true
		if t.Stdout != nil {
			m.streams = append(m.streams, &stream{typ: TypeStdout, gtid: t.GTaskID, ltid: t.LTaskID, r: t.Stdout, local: t.StdoutLocal})
			m.nout++
		}
		if t.Stderr != nil {
			m.streams = append(m.streams, &stream{typ: TypeStderr, gtid: t.GTaskID, ltid: t.LTaskID, r: t.Stderr, local: t.StderrLocal})
			m.nerr++
		}
		if t.Stdin != nil {
			s := &stdinSink{gtid: t.GTaskID, w: t.Stdin, q: make(chan []byte, StdinQueueFrames)}
			m.stdins = append(m.stdins, s)
			m.byGTID[t.GTaskID] = s
		}
	}
	return m, nil
}

// StdoutObjs is the stdout_objs every client's init message carries: the
// number of STDOUT EOF frames it will receive (stock counts its stdout eio
// objects the same way). Any goroutine.
func (m *Mux) StdoutObjs() uint32 { return m.nout }

// StderrObjs is the stderr_objs counterpart of StdoutObjs. Any goroutine.
func (m *Mux) StderrObjs() uint32 { return m.nerr }

// Attach connects to an srun or sattach I/O port and adds it as a client.
// init's StdoutObjs/StderrObjs are replaced by the mux's counts, so EOF
// counting is exact; Version, NodeID and IOKey are the caller's. A client
// attached after Start first receives up to ReplayFrames recent frames, then
// an EOF frame for each stream already finished, then live output. The
// connect and init write are bounded by Config.DialTimeout and ctx. Any
// goroutine.
func (m *Mux) Attach(ctx context.Context, addr string, init InitMsg) (*Client, error) {
	m.mu.Lock()
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return nil, ErrClosed
	}
	init.StdoutObjs, init.StderrObjs = m.nout, m.nerr
	c, err := Dial(ctx, addr, init, m.cfg.DialTimeout, m.log)
	if err != nil {
		return nil, err
	}
	c.stall = m.cfg.StallTimeout
	c.peerWait = m.cfg.PeerCloseWait
	c.gauge = &m.gauge
	c.onDrop = m.dropClient

	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		c.Close()
		return nil, ErrClosed
	}
	c.initial = !m.started
	if m.started {
		// Snapshot under the lock that orders frames: everything not in
		// the snapshot is sent to c through its queue, after it.
		c.preload = m.cache.snapshot()
		for _, s := range m.streams {
			if s.eofSent {
				c.preload = append(c.preload, s.eofFrame())
			}
		}
	}
	m.clients = append(m.clients, c)
	n := len(m.clients)
	m.mu.Unlock()

	m.log.Debug("I/O client attached", "peer", addr, "node_id", init.NodeID,
		"stdout_objs", init.StdoutObjs, "stderr_objs", init.StderrObjs, "clients", n)
	c.Start(m.handleFrame)
	return c, nil
}

// Start begins reading the task streams and writing task stdin. Only the
// first call has an effect. Any goroutine.
func (m *Mux) Start() {
	m.mu.Lock()
	if m.started || m.closing {
		m.mu.Unlock()
		return
	}
	m.started = true
	m.mu.Unlock()

	for _, s := range m.stdins {
		m.stdinWG.Add(1)
		go m.runStdin(s)
	}
	for _, s := range m.streams {
		m.streamWG.Add(1)
		go m.runStream(s)
	}
	go func() {
		m.streamWG.Wait()
		close(m.outputDone)
	}()
}

// OutputDone is closed once every task stream reached EOF and its EOF frame
// was queued to every client. Any goroutine.
func (m *Mux) OutputDone() <-chan struct{} { return m.outputDone }

// Stats reports the current buffering. Any goroutine.
func (m *Mux) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{
		Clients:        len(m.clients),
		Dropped:        m.dropped,
		QueuedBytes:    m.gauge.cur.Load(),
		MaxQueuedBytes: m.gauge.max.Load(),
	}
}

// Wait is the normal end of the step's I/O (stock _wait_for_io): it waits
// for every task stream to reach EOF, closes the tasks' stdin, then shuts
// each client down in order (flush, half-close, wait for the peer's close)
// and releases everything. All of it within timeout (DefaultWaitTimeout if
// 0); past it everything is closed hard and ErrTimeout returned. Any
// goroutine; call it once the tasks have exited and, as stock does, after
// MESSAGE_TASK_EXIT went out (an srun expecting no EOFs closes only then).
func (m *Mux) Wait(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	deadline := time.Now().Add(timeout)
	m.mu.Lock()
	started := m.started
	m.mu.Unlock()
	if !started {
		return ErrNotStarted
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-m.outputDone:
	case <-t.C:
		m.log.Warn("task output still open, abandoning I/O", "timeout", timeout)
		m.Close()
		return fmt.Errorf("stepio: task output open after %s: %w", timeout, ErrTimeout)
	}
	m.stopStdin()

	m.mu.Lock()
	m.closing = true
	clients := slices.Clone(m.clients)
	m.mu.Unlock()
	errs := make([]error, len(clients)+1)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Shutdown(time.Until(deadline))
		}()
	}
	wg.Wait()
	errs[len(clients)] = m.Close()
	return errors.Join(errs...)
}

// Close drops every client and closes every task stream and stdin now,
// without flushing. Idempotent; safe after Wait. Any goroutine.
func (m *Mux) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closing = true
		clients := m.clients
		m.clients = nil
		started := m.started
		m.mu.Unlock()

		m.stopStdin()
		for _, c := range clients {
			c.Close()
		}
		// Closing the readers unblocks the stream goroutines' reads.
		for _, s := range m.streams {
			s.close()
		}
		if !started {
			return
		}
		done := make(chan struct{})
		go func() {
			m.streamWG.Wait()
			m.stdinWG.Wait()
			close(done)
		}()
		t := time.NewTimer(abandonWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			// A reader that is not an io.Closer cannot be unblocked.
			m.log.Warn("I/O goroutines still running after close", "wait", abandonWait)
			m.closeErr = fmt.Errorf("stepio: goroutines still running after %s: %w", abandonWait, ErrTimeout)
		}
	})
	return m.closeErr
}

// dropClient removes a client whose writer failed or stalled.
func (m *Mux) dropClient(c *Client, err error) {
	m.mu.Lock()
	i := slices.Index(m.clients, c)
	if i >= 0 {
		m.clients = slices.Delete(m.clients, i, i+1)
		m.dropped++
	}
	left := len(m.clients)
	m.mu.Unlock()
	if i >= 0 && left == 0 {
		m.log.Info("no I/O client left, discarding task output", "error", err)
	}
}

func (m *Mux) stopStdin() {
	m.stdinStopOnce.Do(func() {
		close(m.stdinStop)
		// Closing unblocks a Write stuck on a task that does not read.
		for _, s := range m.stdins {
			s.close(m.log)
		}
	})
}

// handleFrame routes a frame read from client c (reader goroutine of c).
// Like stock, every client may send stdin, not only the first srun.
func (m *Mux) handleFrame(c *Client, h Header, p []byte) {
	switch h.Type {
	case TypeConnectionTest:
		if h.Length != 0 {
			m.log.Warn("bad connection test frame", "peer", c.RemoteAddr(), "length", h.Length)
			return
		}
		// Stock answers on every client, not only the asking one
		// (io.c _send_connection_okay_response).
		m.mu.Lock()
		targets := slices.Clone(m.clients)
		m.mu.Unlock()
		for _, t := range targets {
			_ = t.Send(connTestFrame)
		}
	case TypeStdin:
		s := m.byGTID[h.GTaskID]
		if s == nil {
			if m.log.IsTrace() {
				m.log.Trace("stdin for a task without stdin here", "gtid", h.GTaskID)
			}
			return
		}
		m.deliver(s, clonePayload(p))
	case TypeAllStdin:
		d := clonePayload(p) // shared by all tasks, never modified
		for _, s := range m.stdins {
			m.deliver(s, d)
		}
	default:
		m.log.Warn("unexpected frame type from I/O client", "peer", c.RemoteAddr(), "type", h.Type.String())
	}
}

// clonePayload copies a reader-owned payload; empty means EOF.
func clonePayload(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// deliver queues stdin for a task, blocking (and so pushing back on the
// sender) while its queue is full, until stdin forwarding stops.
func (m *Mux) deliver(s *stdinSink, d []byte) {
	select {
	case s.q <- d:
	case <-m.stdinStop:
	}
}

func (m *Mux) runStdin(s *stdinSink) {
	defer m.stdinWG.Done()
	for {
		select {
		case d := <-s.q:
			if s.closed {
				continue // after EOF or a write error: discard, as stock
			}
			if len(d) == 0 {
				s.close(m.log)
				s.closed = true
				continue
			}
			if _, err := s.w.Write(d); err != nil {
				m.log.Debug("task stdin write failed, closing it", "gtid", s.gtid, "error", err)
				s.close(m.log)
				s.closed = true
			}
		case <-m.stdinStop:
			s.close(m.log)
			return
		}
	}
}

func (s *stdinSink) close(log hclog.Logger) {
	s.closeOnce.Do(func() {
		if err := s.w.Close(); err != nil {
			log.Debug("close task stdin", "gtid", s.gtid, "error", err)
		}
	})
}

func (m *Mux) runStream(s *stream) {
	defer m.streamWG.Done()
	defer s.close()
	if m.cfg.LineBuffered {
		m.pumpLines(s)
	} else {
		m.pumpRaw(s)
	}
	m.emit(s, nil, true)
}

// pumpRaw forwards each read as it comes (unbuffered srun I/O).
func (m *Mux) pumpRaw(s *stream) {
	buf := make([]byte, MaxMsgLen)
	for {
		n, err := s.r.Read(buf)
		if n > 0 {
			m.emit(s, buf[:n], false)
		}
		if err != nil {
			m.logReadEnd(s, err)
			return
		}
	}
}

// pumpLines forwards whole lines, as many as fit one frame; a line longer
// than a frame goes out a frame at a time; at EOF the rest goes as is
// (io.c _task_build_message with LAUNCH_BUFFERED_IO).
func (m *Mux) pumpLines(s *stream) {
	// After the emit loop fewer than MaxMsgLen bytes remain, so every
	// read has at least MaxMsgLen bytes of room.
	buf := make([]byte, 2*MaxMsgLen)
	used := 0
	for {
		n, err := s.r.Read(buf[used:])
		used += n
		for used > 0 {
			k := bytes.LastIndexByte(buf[:min(used, MaxMsgLen)], '\n') + 1
			if k == 0 {
				if used < MaxMsgLen {
					break // partial line: wait for the rest
				}
				k = MaxMsgLen
			}
			m.emit(s, buf[:k], false)
			used = copy(buf, buf[k:used])
		}
		if err != nil {
			for off := 0; off < used; off += MaxMsgLen {
				m.emit(s, buf[off:min(off+MaxMsgLen, used)], false)
			}
			m.logReadEnd(s, err)
			return
		}
	}
}

func (m *Mux) logReadEnd(s *stream, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.EIO) {
		return
	}
	m.log.Debug("task output read ended", "gtid", s.gtid, "type", s.typ.String(), "error", err)
}

// emit frames payload (or an EOF frame) and hands it to every client. The
// client list is taken under mu together with the replay cache and the EOF
// mark, so Attach sees each frame exactly once: in its snapshot or queued.
func (m *Mux) emit(s *stream, payload []byte, eof bool) {
	frame, _ := AppendFrame(make([]byte, 0, HeaderLen+len(payload)), Header{Type: s.typ, GTaskID: s.gtid, LTaskID: s.ltid}, payload)
	local := !eof && s.local != nil
	m.mu.Lock()
	for _, c := range m.clients {
		if local && c.initial {
			continue
		}
		s.targets = append(s.targets, c)
	}
	if eof {
		s.eofSent = true
	} else {
		m.cache.push(frame)
	}
	m.mu.Unlock()

	if local && !s.localBroken {
		if _, err := s.local.Write(payload); err != nil {
			m.log.Error("write task output locally", "gtid", s.gtid, "type", s.typ.String(), "error", err)
			s.localBroken = true
		}
	}
	for _, c := range s.targets {
		// An error means the client is gone; it was or will be dropped.
		_ = c.Send(frame)
	}
	clear(s.targets) // do not pin dropped clients
	s.targets = s.targets[:0]
}

func (s *stream) eofFrame() []byte {
	return Header{Type: s.typ, GTaskID: s.gtid, LTaskID: s.ltid}.Append(make([]byte, 0, HeaderLen))
}

func (s *stream) close() {
	s.closeOnce.Do(func() {
		if c, ok := s.r.(io.Closer); ok {
			_ = c.Close()
		}
	})
}

// frameRing keeps the last len(buf) data frames for replay.
type frameRing struct {
	buf     [][]byte
	head, n int
}

func (r *frameRing) push(f []byte) {
	if len(r.buf) == 0 {
		return
	}
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = f
		r.n++
		return
	}
	r.buf[r.head] = f
	r.head = (r.head + 1) % len(r.buf)
}

func (r *frameRing) snapshot() [][]byte {
	out := make([][]byte, 0, r.n)
	for i := 0; i < r.n; i++ {
		out = append(out, r.buf[(r.head+i)%len(r.buf)])
	}
	return out
}
