package stepio

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMux_LabelledOutput_ExactEOF(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{keepFrames: true})
	var tasks []Task
	var outs, errs []*os.File
	for i := 0; i < 3; i++ {
		or, ow := pipe(t)
		er, ew := pipe(t)
		tasks = append(tasks, Task{GTaskID: uint16(10 + i), LTaskID: uint16(i), Stdout: or, Stderr: er})
		outs, errs = append(outs, ow), append(errs, ew)
	}
	m, c := startMux(t, Config{Tasks: tasks}, srun)
	if c.init.StdoutObjs != 3 || c.init.StderrObjs != 3 || c.init.NodeID != 0 || c.init.Version != ProtocolVersion {
		t.Fatalf("init = %+v", c.init)
	}
	for i := range outs {
		fmt.Fprintf(outs[i], "out %d\n", i)
		fmt.Fprintf(errs[i], "err %d\n", i)
		outs[i].Close()
		errs[i].Close()
	}
	c.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// srun kept reading until our FIN: nothing may follow the EOFs.
	c.waitClosed(t)
	c.checkClean(t)
	for i := 0; i < 3; i++ {
		gtid := uint16(10 + i)
		if got, want := c.text(TypeStdout, gtid), fmt.Sprintf("out %d\n", i); got != want {
			t.Errorf("stdout of %d = %q, want %q", gtid, got, want)
		}
		if got, want := c.text(TypeStderr, gtid), fmt.Sprintf("err %d\n", i); got != want {
			t.Errorf("stderr of %d = %q, want %q", gtid, got, want)
		}
		for _, typ := range []MsgType{TypeStdout, TypeStderr} {
			s := c.stream(typ, gtid)
			if s.eofs != 1 || s.ltid != uint16(i) {
				t.Errorf("%s of %d: %d EOFs, ltid %d", typ, gtid, s.eofs, s.ltid)
			}
		}
	}
	if st := m.Stats(); st.QueuedBytes != 0 || st.Dropped != 0 {
		t.Errorf("stats after Wait: %+v", st)
	}
}

// --pty: only task 0 has a stream (stdout and stderr share the terminal).
func TestMux_PtyCounts(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{keepFrames: true})
	or, ow := pipe(t)
	tasks := []Task{{GTaskID: 0, Stdout: or}, {GTaskID: 1, LTaskID: 1}}
	m, c := startMux(t, Config{Tasks: tasks}, srun)
	if c.init.StdoutObjs != 1 || c.init.StderrObjs != 0 || m.StdoutObjs() != 1 || m.StderrObjs() != 0 {
		t.Fatalf("init = %+v", c.init)
	}
	io.WriteString(ow, "$ ")
	ow.Close()
	c.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
	if got := c.text(TypeStdout, 0); got != "$ " {
		t.Fatalf("stdout = %q", got)
	}
}

func TestMux_StdinRouting(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{})
	r0, w0 := pipe(t)
	r1, w1 := pipe(t)
	tasks := []Task{
		{GTaskID: 0, Stdin: w0},
		{GTaskID: 1, LTaskID: 1, Stdin: w1},
		{GTaskID: 2, LTaskID: 2}, // stdin from a file: frames discarded
	}
	m, c := startMux(t, Config{Tasks: tasks}, srun)
	c.send(t, Header{Type: TypeStdin, GTaskID: 1, LTaskID: AllTasks}, []byte("hello "))
	c.send(t, Header{Type: TypeStdin, GTaskID: 7, LTaskID: AllTasks}, []byte("nobody"))
	c.send(t, Header{Type: TypeStdin, GTaskID: 2, LTaskID: AllTasks}, []byte("file"))
	c.send(t, Header{Type: TypeAllStdin, GTaskID: AllTasks, LTaskID: AllTasks}, []byte("all"))
	c.send(t, Header{Type: TypeStdin, GTaskID: 0, LTaskID: AllTasks}, nil) // EOF for task 0 only
	c.send(t, Header{Type: TypeAllStdin, GTaskID: AllTasks, LTaskID: AllTasks}, []byte(" more"))
	c.send(t, Header{Type: TypeAllStdin, GTaskID: AllTasks, LTaskID: AllTasks}, nil)

	for _, tc := range []struct {
		r    *os.File
		want string
	}{{r0, "all"}, {r1, "hello all more"}} {
		tc.r.SetReadDeadline(time.Now().Add(testTimeout))
		got, err := io.ReadAll(tc.r) // returns at the EOF frame's close
		if err != nil || string(got) != tc.want {
			t.Errorf("stdin = %q, %v; want %q", got, err, tc.want)
		}
	}
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
}

func TestMux_ConnectionTest(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{})
	sattach := newFakeSrun(t, srunOpts{})
	or, ow := pipe(t)
	m, c := startMux(t, Config{Tasks: []Task{{Stdout: or}}}, srun)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := m.Attach(ctx, sattach.addr(), initFor(0)); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	b := sattach.next(t)

	c.send(t, Header{Type: TypeConnectionTest}, nil)
	want := mustHex("0004 0000 0000 00000000")
	// Stock answers on every client, the asking one included.
	for name, conn := range map[string]*srunConn{"srun": c, "sattach": b} {
		waitFor(t, name+" connection test reply", func() bool { return len(conn.testReplies()) > 0 })
		if got := conn.testReplies(); len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Errorf("%s got %x, want one %x", name, got, want)
		}
	}
	ow.Close()
	c.waitAllEOF(t)
	b.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
	b.checkClean(t)
}

// writeRandom writes n pseudo-random bytes to w in 64 KiB pieces, counting
// progress in written, and returns their sha256.
func writeRandom(w io.WriteCloser, n int64, seed uint64, written *atomic.Int64) ([32]byte, error) {
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for left := n; left > 0; {
		p := buf[:min(int64(len(buf)), left)]
		rng.Read(p)
		h.Write(p)
		if _, err := w.Write(p); err != nil {
			return [32]byte{}, err
		}
		left -= int64(len(p))
		if written != nil {
			written.Add(int64(len(p)))
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, w.Close()
}

type writeResult struct {
	sum [32]byte
	err error
}

func goWriteRandom(w io.WriteCloser, n int64, seed uint64, written *atomic.Int64) <-chan writeResult {
	ch := make(chan writeResult, 1)
	go func() {
		sum, err := writeRandom(w, n, seed, written)
		ch <- writeResult{sum, err}
	}()
	return ch
}

func waitWrite(t *testing.T, ch <-chan writeResult) [32]byte {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("task write: %v", r.err)
		}
		return r.sum
	case <-time.After(testTimeout):
		t.Fatalf("task writer still blocked after %s", testTimeout)
		return [32]byte{}
	}
}

func checkSum(t *testing.T, c *srunConn, typ MsgType, gtid uint16, n int64, want [32]byte) {
	t.Helper()
	s := c.stream(typ, gtid)
	if s == nil {
		t.Fatalf("no %s from task %d", typ, gtid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.n != n || !bytes.Equal(s.sum.Sum(nil), want[:]) {
		t.Fatalf("%s of %d: %d bytes, sha256 %x; want %d bytes, %x", typ, gtid, s.n, s.sum.Sum(nil), n, want)
	}
}

func TestMux_100MBIntact(t *testing.T) {
	const n = 100 << 20
	srun := newFakeSrun(t, srunOpts{})
	or, ow := pipe(t)
	m, c := startMux(t, Config{Tasks: []Task{{GTaskID: 3, Stdout: or}}}, srun)
	done := goWriteRandom(ow, n, 1, nil)
	sum := waitWrite(t, done)
	c.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
	checkSum(t, c, TypeStdout, 3, n, sum)
	if st := m.Stats(); st.MaxQueuedBytes > MaxClientQueuedBytes {
		t.Fatalf("queued up to %d bytes, bound %d", st.MaxQueuedBytes, MaxClientQueuedBytes)
	}
}

// waitStalled waits until written stops moving for a while and returns it.
func waitStalled(t *testing.T, written *atomic.Int64) int64 {
	t.Helper()
	const quiet = 300 * time.Millisecond
	last, since := written.Load(), time.Now()
	waitFor(t, "the task writer to block", func() bool {
		if v := written.Load(); v != last {
			last, since = v, time.Now()
		}
		return last > 0 && time.Since(since) >= quiet
	})
	return last
}

func TestMux_SlowReaderBlocksTask(t *testing.T) {
	const n = 64 << 20
	// Default socket buffers: a tiny SO_RCVBUF on loopback (MSS 64 KiB)
	// leaves the window too small to reopen and TCP stalls on its persist
	// timer, which would test the kernel rather than the mux.
	srun := newFakeSrun(t, srunOpts{})
	or, ow := pipe(t)
	m, c := startMux(t, Config{Tasks: []Task{{Stdout: or}}}, srun)
	c.pause()
	var written atomic.Int64
	done := goWriteRandom(ow, n, 2, &written)

	stuck := waitStalled(t, &written)
	if stuck >= n {
		t.Fatalf("writer finished (%d bytes) although srun is not reading", stuck)
	}
	st := m.Stats()
	t.Logf("writer blocked after %d bytes; mux holds %d bytes (max %d)", stuck, st.QueuedBytes, st.MaxQueuedBytes)
	if st.MaxQueuedBytes > MaxClientQueuedBytes || st.QueuedBytes == 0 {
		t.Fatalf("queued %d bytes (max %d), want >0 and max <= %d", st.QueuedBytes, st.MaxQueuedBytes, MaxClientQueuedBytes)
	}

	c.resume()
	sum := waitWrite(t, done)
	c.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
	checkSum(t, c, TypeStdout, 0, n, sum)
	if st := m.Stats(); st.MaxQueuedBytes > MaxClientQueuedBytes || st.Dropped != 0 {
		t.Fatalf("stats %+v, bound %d", st, MaxClientQueuedBytes)
	}
}

func TestMux_AttachLater(t *testing.T) {
	for _, tc := range []struct {
		name   string
		replay int
		want   string
	}{
		{"from attach time on", 0, "after\n"},
		{"stock replay", StockReplayFrames, "before\nafter\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srun := newFakeSrun(t, srunOpts{keepFrames: true})
			sattach := newFakeSrun(t, srunOpts{keepFrames: true})
			o0r, o0w := pipe(t)
			o1r, o1w := pipe(t)
			tasks := []Task{{GTaskID: 0, Stdout: o0r}, {GTaskID: 1, LTaskID: 1, Stdout: o1r}}
			m, c := startMux(t, Config{Tasks: tasks, ReplayFrames: tc.replay}, srun)

			io.WriteString(o0w, "before\n")
			waitFor(t, "srun to get the first line", func() bool { return c.text(TypeStdout, 0) == "before\n" })
			o1w.Close()
			waitFor(t, "task 1's EOF at srun", func() bool { s := c.stream(TypeStdout, 1); return s != nil && c.eofsOf(s) == 1 })

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if _, err := m.Attach(ctx, sattach.addr(), initFor(4)); err != nil {
				t.Fatalf("Attach: %v", err)
			}
			b := sattach.next(t)
			// Two stdout streams, one of them already finished: the
			// count stays exact because the late client gets its EOF.
			if b.init.StdoutObjs != 2 || b.init.StderrObjs != 0 || b.init.NodeID != 4 {
				t.Fatalf("sattach init = %+v", b.init)
			}
			io.WriteString(o0w, "after\n")
			o0w.Close()
			c.waitAllEOF(t)
			b.waitAllEOF(t)
			if err := m.Wait(testTimeout); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			b.waitClosed(t)
			c.checkClean(t)
			b.checkClean(t)
			if got := c.text(TypeStdout, 0); got != "before\nafter\n" {
				t.Errorf("srun got %q", got)
			}
			if got := b.text(TypeStdout, 0); got != tc.want {
				t.Errorf("sattach got %q, want %q", got, tc.want)
			}
			if s := b.stream(TypeStdout, 1); s == nil || b.eofsOf(s) != 1 {
				t.Errorf("sattach: no EOF for the finished stream")
			}
		})
	}
}

func (c *srunConn) eofsOf(s *streamData) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.eofs
}

func TestMux_DeadClientDropped(t *testing.T) {
	const n = 32 << 20
	srun := newFakeSrun(t, srunOpts{})
	dead := newFakeSrun(t, srunOpts{noRead: true, rcvBuf: 16 << 10})
	or, ow := pipe(t)
	cfg := Config{Tasks: []Task{{GTaskID: 5, Stdout: or}}, StallTimeout: 300 * time.Millisecond}
	m, c := startMux(t, cfg, srun)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := m.Attach(ctx, dead.addr(), initFor(0)); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	dead.next(t)

	sum := waitWrite(t, goWriteRandom(ow, n, 3, nil)) // the task is not held up for good
	c.waitAllEOF(t)
	checkSum(t, c, TypeStdout, 5, n, sum)
	if st := m.Stats(); st.Dropped != 1 || st.Clients != 1 {
		t.Fatalf("stats %+v, want the dead client dropped", st)
	}
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
	if st := m.Stats(); st.MaxQueuedBytes > 2*MaxClientQueuedBytes || st.QueuedBytes != 0 {
		t.Fatalf("stats %+v, bound %d", st, 2*MaxClientQueuedBytes)
	}
}

// srun killed mid-step: the task keeps writing into a drained pipe.
func TestMux_NoClientLeftDrains(t *testing.T) {
	const n = 16 << 20
	srun := newFakeSrun(t, srunOpts{noRead: true})
	or, ow := pipe(t)
	m, c := startMux(t, Config{Tasks: []Task{{Stdout: or}}}, srun)
	c.conn.Close()
	waitWrite(t, goWriteRandom(ow, n, 4, nil))
	waitFor(t, "the broken srun to be dropped", func() bool { return m.Stats().Dropped == 1 })
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestMux_Buffering(t *testing.T) {
	long := strings.Repeat("y", 1500)
	chunks := func() [][]byte {
		return [][]byte{[]byte("ab"), []byte("c\nde"), []byte("f\n"), []byte(long), []byte("x")}
	}
	cases := []struct {
		name  string
		lines bool
		want  []string
	}{
		{"unbuffered forwards each read", false, []string{"ab", "c\nde", "f\n", long[:1024], long[1024:], "x"}},
		{"line buffered", true, []string{"abc\n", "def\n", long[:1024], long[1024:] + "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srun := newFakeSrun(t, srunOpts{keepFrames: true})
			cfg := Config{LineBuffered: tc.lines, Tasks: []Task{{Stdout: &chunkReader{chunks: chunks()}}}}
			m, c := startMux(t, cfg, srun)
			c.waitAllEOF(t)
			if err := m.Wait(testTimeout); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			c.checkClean(t)
			var got []string
			for _, f := range c.stream(TypeStdout, 0).frames {
				got = append(got, string(f))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("frames\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestMux_LineBufferedManyLines(t *testing.T) {
	// Whole lines are packed up to a frame; none is split.
	var in strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&in, "line %03d\n", i)
	}
	srun := newFakeSrun(t, srunOpts{keepFrames: true})
	cfg := Config{LineBuffered: true, Tasks: []Task{{Stdout: strings.NewReader(in.String())}}}
	m, c := startMux(t, cfg, srun)
	c.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := c.text(TypeStdout, 0); got != in.String() {
		t.Fatalf("data differs")
	}
	for _, f := range c.stream(TypeStdout, 0).frames {
		if len(f) > MaxMsgLen || f[len(f)-1] != '\n' {
			t.Fatalf("frame of %d bytes ends with %q", len(f), f[len(f)-1])
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// srun -l -o file: the stepd writes the file, srun counts only the EOF.
func TestMux_LocalOutput(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{keepFrames: true})
	var local lockedBuffer
	tasks := []Task{{Stdout: strings.NewReader("to the file\n"), StdoutLocal: &local}}
	m, c := startMux(t, Config{Tasks: tasks}, srun)
	if c.init.StdoutObjs != 1 {
		t.Fatalf("init = %+v", c.init)
	}
	c.waitAllEOF(t)
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.checkClean(t)
	if s := c.stream(TypeStdout, 0); s == nil || s.n != 0 || s.eofs != 1 {
		t.Fatalf("srun got %+v, want the EOF only", s)
	}
	if got := local.String(); got != "to the file\n" {
		t.Fatalf("local = %q", got)
	}
}

func TestMux_WaitTimeout(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{})
	or, _ := pipe(t) // the task never closes its stdout
	m, _ := startMux(t, Config{Tasks: []Task{{Stdout: or}}}, srun)
	err := m.Wait(100 * time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wait = %v, want ErrTimeout", err)
	}
	select {
	case <-m.OutputDone(): // Close unblocked the reader
	case <-time.After(testTimeout):
		t.Fatalf("stream goroutine still running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := m.Attach(ctx, srun.addr(), initFor(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Attach after close = %v", err)
	}
}

func TestMux_WaitBeforeStart(t *testing.T) {
	m, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Wait(time.Second); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Wait = %v", err)
	}
}

func TestNew_DuplicateTask(t *testing.T) {
	if _, err := New(Config{Tasks: []Task{{GTaskID: 1}, {GTaskID: 1}}}, nil); err == nil {
		t.Fatal("duplicate gtid accepted")
	}
}

func TestMux_BadFrameDropsClient(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{})
	or, ow := pipe(t)
	m, c := startMux(t, Config{Tasks: []Task{{Stdout: or}}}, srun)
	c.conn.Write(mustHex("0000 0000 ffff 00000401")) // over MaxMsgLen
	waitFor(t, "the client to be dropped", func() bool { return m.Stats().Dropped == 1 })
	ow.Close()
	if err := m.Wait(testTimeout); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestClient_Standalone(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{keepFrames: true, closeOnEOF: true})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	init := InitMsg{Version: ProtocolVersion, NodeID: 2, StdoutObjs: 1, IOKey: testKey()}
	cl, err := Dial(ctx, srun.addr(), init, 0, testLogger(t))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer cl.Close()
	cl.Start(nil)
	c := srun.next(t)
	if c.init.NodeID != 2 || c.init.StdoutObjs != 1 {
		t.Fatalf("init = %+v", c.init)
	}
	c.send(t, Header{Type: TypeConnectionTest}, nil)
	waitFor(t, "connection test echo", func() bool { return len(c.testReplies()) == 1 })

	f, _ := AppendFrame(nil, Header{Type: TypeStdout, GTaskID: 9, LTaskID: 0}, []byte("hi\n"))
	eof, _ := AppendFrame(nil, Header{Type: TypeStdout, GTaskID: 9}, nil)
	if err := cl.Send(f); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := cl.Send(eof); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := cl.Shutdown(testTimeout); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	c.waitClosed(t)
	c.checkClean(t)
	if got := c.text(TypeStdout, 9); got != "hi\n" {
		t.Fatalf("got %q", got)
	}
	if err := cl.Send(f); !errors.Is(err, ErrClientGone) {
		t.Fatalf("Send after Shutdown = %v", err)
	}
}

func TestDial_Refused(t *testing.T) {
	srun := newFakeSrun(t, srunOpts{})
	addr := srun.addr()
	srun.ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := Dial(ctx, addr, initFor(0), time.Second, nil); err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
}
