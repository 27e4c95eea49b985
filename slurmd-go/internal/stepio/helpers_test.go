package stepio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// testTimeout bounds every wait in the tests.
const testTimeout = 30 * time.Second

func testLogger(t *testing.T) hclog.Logger {
	w := &tWriter{t: t}
	// Goroutines may still log while the test is torn down; t.Log would
	// panic after the test ends.
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{
		Name:   t.Name(),
		Level:  hclog.Debug,
		Output: w,
	})
}

type tWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool // guarded by mu
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// testKey looks like a job credential signature: a munge string plus NUL.
func testKey() []byte {
	return append([]byte("MUNGE:AwQDAAAfake-credential-signature::"), 0)
}

type srunOpts struct {
	noRead     bool // accept and handshake, then never read (a dead peer)
	closeOnEOF bool // close after the announced EOFs arrived, as srun does
	keepFrames bool // keep every payload, not only the hash
	rcvBuf     int  // SO_RCVBUF of the listening socket, 0 = default
}

// fakeSrun is srun's I/O listener: it reads and validates the init message
// and records what each connection receives.
type fakeSrun struct {
	t     *testing.T
	ln    net.Listener
	key   []byte
	opts  srunOpts
	conns chan *srunConn
}

func newFakeSrun(t *testing.T, opts srunOpts) *fakeSrun {
	t.Helper()
	lc := net.ListenConfig{}
	if opts.rcvBuf > 0 {
		lc.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, opts.rcvBuf)
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	f := &fakeSrun{t: t, ln: ln, key: testKey(), opts: opts, conns: make(chan *srunConn, 8)}
	t.Cleanup(func() { ln.Close() })
	go f.acceptLoop()
	return f
}

func (f *fakeSrun) addr() string { return f.ln.Addr().String() }

func (f *fakeSrun) acceptLoop() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.t.Cleanup(func() { conn.Close() })
		c := &srunConn{
			conn:    conn,
			opts:    f.opts,
			streams: make(map[streamKey]*streamData),
			allEOF:  make(chan struct{}),
			closed:  make(chan struct{}),
		}
		conn.SetReadDeadline(time.Now().Add(testTimeout))
		init, err := ReadInit(conn)
		conn.SetReadDeadline(time.Time{})
		if err != nil {
			c.violate("init: %v", err)
		} else if !bytes.Equal(init.IOKey, f.key) {
			c.violate("io_key mismatch: %q", init.IOKey)
		}
		c.init = init
		if init.StdoutObjs == 0 && init.StderrObjs == 0 {
			close(c.allEOF)
		}
		if !f.opts.noRead {
			go c.readLoop()
		}
		f.conns <- c
	}
}

// next returns the next accepted connection.
func (f *fakeSrun) next(t *testing.T) *srunConn {
	t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(testTimeout):
		t.Fatalf("no I/O connection to %s", f.addr())
		return nil
	}
}

type streamKey struct {
	typ  MsgType
	gtid uint16
}

type streamData struct {
	ltid   uint16
	n      int64
	sum    hash.Hash
	data   bytes.Buffer
	frames [][]byte
	eofs   int
}

type srunConn struct {
	conn net.Conn
	init InitMsg
	opts srunOpts

	allEOF chan struct{} // every announced EOF arrived
	closed chan struct{} // reader ended

	mu         sync.Mutex
	streams    map[streamKey]*streamData // guarded by mu
	tests      [][]byte                  // guarded by mu: raw CONNECTION_TEST frames
	outEOF     uint32                    // guarded by mu
	errEOF     uint32                    // guarded by mu
	violations []string                  // guarded by mu
	gate       chan struct{}             // guarded by mu: reads wait while non-nil
}

func (c *srunConn) violate(format string, args ...any) {
	c.mu.Lock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *srunConn) pause() {
	c.mu.Lock()
	c.gate = make(chan struct{})
	c.mu.Unlock()
}

func (c *srunConn) resume() {
	c.mu.Lock()
	if c.gate != nil {
		close(c.gate)
		c.gate = nil
	}
	c.mu.Unlock()
}

func (c *srunConn) readLoop() {
	defer close(c.closed)
	defer c.conn.Close() // srun closes once it stops reading
	br := bufio.NewReaderSize(c.conn, 16<<10)
	for {
		c.mu.Lock()
		g := c.gate
		c.mu.Unlock()
		if g != nil {
			<-g
		}
		var hb [HeaderLen]byte
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.violate("read header: %v", err)
			}
			return
		}
		h, _ := ParseHeader(hb[:])
		if h.Length > MaxMsgLen {
			c.violate("frame of %d bytes", h.Length)
			return
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(br, p); err != nil {
			c.violate("read payload: %v", err)
			return
		}
		if c.record(h, hb, p) {
			c.conn.Close()
			return
		}
	}
}

// record notes one frame; it reports whether srun would now close.
func (c *srunConn) record(h Header, hb [HeaderLen]byte, p []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch h.Type {
	case TypeConnectionTest:
		c.tests = append(c.tests, append([]byte(nil), hb[:]...))
		return false
	case TypeStdout, TypeStderr:
	default:
		c.violations = append(c.violations, fmt.Sprintf("unexpected %s frame", h.Type))
		return false
	}
	k := streamKey{h.Type, h.GTaskID}
	s := c.streams[k]
	if s == nil {
		s = &streamData{ltid: h.LTaskID, sum: sha256.New()}
		c.streams[k] = s
	}
	if s.ltid != h.LTaskID {
		c.violations = append(c.violations, fmt.Sprintf("%v: ltaskid %d then %d", k, s.ltid, h.LTaskID))
	}
	if s.eofs > 0 {
		c.violations = append(c.violations, fmt.Sprintf("%v: frame after EOF", k))
	}
	if h.Length == 0 {
		s.eofs++
		if h.Type == TypeStdout {
			c.outEOF++
		} else {
			c.errEOF++
		}
		if c.outEOF > c.init.StdoutObjs || c.errEOF > c.init.StderrObjs {
			c.violations = append(c.violations, fmt.Sprintf("EOFs %d/%d exceed announced %d/%d",
				c.outEOF, c.errEOF, c.init.StdoutObjs, c.init.StderrObjs))
		}
		if c.outEOF == c.init.StdoutObjs && c.errEOF == c.init.StderrObjs {
			close(c.allEOF)
			return c.opts.closeOnEOF
		}
		return false
	}
	s.n += int64(len(p))
	s.sum.Write(p)
	if c.opts.keepFrames {
		s.data.Write(p)
		s.frames = append(s.frames, p)
	}
	return false
}

func (c *srunConn) send(t *testing.T, h Header, payload []byte) {
	t.Helper()
	f, err := AppendFrame(nil, h, payload)
	if err != nil {
		t.Fatalf("frame: %v", err)
	}
	c.conn.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.conn.Write(f); err != nil {
		t.Fatalf("send %s: %v", h.Type, err)
	}
}

func (c *srunConn) waitAllEOF(t *testing.T) {
	t.Helper()
	select {
	case <-c.allEOF:
	case <-time.After(testTimeout):
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("EOFs %d/%d of %d/%d after %s", c.outEOF, c.errEOF, c.init.StdoutObjs, c.init.StderrObjs, testTimeout)
	}
}

func (c *srunConn) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(testTimeout):
		t.Fatalf("connection still open after %s", testTimeout)
	}
}

func (c *srunConn) stream(typ MsgType, gtid uint16) *streamData {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[streamKey{typ, gtid}]
}

func (c *srunConn) text(typ MsgType, gtid uint16) string {
	s := c.stream(typ, gtid)
	if s == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.data.String()
}

func (c *srunConn) checkClean(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Errorf("protocol violation: %s", v)
	}
}

func (c *srunConn) testReplies() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.tests...)
}

// waitFor polls cond until it holds or testTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pipe returns an os.Pipe whose ends are closed at the end of the test.
func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("pipe: %v", err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func initFor(nodeID uint32) InitMsg {
	return InitMsg{Version: ProtocolVersion, NodeID: nodeID, IOKey: testKey()}
}

// startMux builds a mux, attaches srun and starts it.
func startMux(t *testing.T, cfg Config, srun *fakeSrun) (*Mux, *srunConn) {
	t.Helper()
	m, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var c *srunConn
	if srun != nil {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if _, err := m.Attach(ctx, srun.addr(), initFor(0)); err != nil {
			t.Fatalf("Attach: %v", err)
		}
		c = srun.next(t)
	}
	m.Start()
	return m, c
}

// chunkReader returns its chunks one Read at a time, then io.EOF.
type chunkReader struct {
	chunks [][]byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}
