package rpcserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Test timeouts: generous bounds for correctness, not timing benchmarks.
const (
	testIO      = 5 * time.Second // a client's whole exchange
	testWait    = 5 * time.Second // WaitFor bound
	testAnswer  = 2 * time.Second // a fresh client must be answered within this
	testTimeout = 10 * time.Second
)

type serverKind struct {
	name string
	new  func(Config, Dispatcher) (Listener, error)
}

var kinds = []serverKind{
	{"gnet", func(c Config, d Dispatcher) (Listener, error) { return New(c, d) }},
	{"net", func(c Config, d Dispatcher) (Listener, error) { return NewNetServer(c, d) }},
}

// dispatcher adapts functions to Dispatcher.
type dispatcher struct {
	serve      func(ctx context.Context, frame []byte, peer netip.AddrPort) []byte
	overloaded func(frame []byte, peer netip.AddrPort) []byte
	calls      atomic.Int64
}

func (d *dispatcher) Serve(ctx context.Context, frame []byte, peer netip.AddrPort) []byte {
	d.calls.Add(1)
	return d.serve(ctx, frame, peer)
}

func (d *dispatcher) Overloaded(frame []byte, peer netip.AddrPort) []byte {
	if d.overloaded == nil {
		return nil
	}
	return d.overloaded(frame, peer)
}

func echo() *dispatcher {
	return &dispatcher{serve: func(_ context.Context, f []byte, _ netip.AddrPort) []byte { return encode(f) }}
}

// encode length-prefixes p.
func encode(p []byte) []byte {
	out := make([]byte, 4+len(p))
	binary.BigEndian.PutUint32(out, uint32(len(p)))
	copy(out[4:], p)
	return out
}

func testLogger() hclog.Logger {
	lvl := hclog.Warn
	if os.Getenv("RPCSERVER_TEST_DEBUG") != "" {
		lvl = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: "test", Level: lvl, Output: os.Stderr})
}

func start(t testing.TB, k serverKind, cfg Config, d Dispatcher) Listener {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Loops == 0 {
		cfg.Loops = 2
	}
	cfg.Logger = testLogger()
	s, err := k.new(cfg, d)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, ErrServerClosed) {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func dial(t testing.TB, s Listener) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr().String(), testIO)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(testIO))
	return c
}

// readAll reads until the server closes the connection; it fails the test on a deadline.
func readAll(t testing.TB, c net.Conn) []byte {
	t.Helper()
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("read: %v (got %d bytes); server did not close", err, len(b))
	}
	return b
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}

// roundTrip sends payload as one frame and returns everything the server wrote before closing.
func roundTrip(t testing.TB, s Listener, payload []byte) []byte {
	t.Helper()
	c := dial(t, s)
	if _, err := c.Write(encode(payload)); err != nil {
		t.Fatalf("write: %v", err)
	}
	return readAll(t, c)
}

// waitFor polls cond until true or testWait passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func forKinds(t *testing.T, fn func(t *testing.T, k serverKind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { fn(t, k) })
	}
}

func TestServer_Echo(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		var deadlineOK atomic.Bool
		d := &dispatcher{serve: func(ctx context.Context, f []byte, peer netip.AddrPort) []byte {
			dl, ok := ctx.Deadline()
			deadlineOK.Store(ok && time.Until(dl) > 0 && time.Until(dl) <= HandlerTimeoutFactor*time.Minute && peer.Addr().Is4())
			return encode(f)
		}}
		s := start(t, k, Config{ConnTimeout: time.Minute}, d)
		for _, payload := range [][]byte{[]byte("hello slurmd"), {}, bytes.Repeat([]byte{0xA5}, 200_000)} {
			got := roundTrip(t, s, payload)
			if want := encode(payload); !bytes.Equal(got, want) {
				t.Fatalf("reply: got %d bytes, want %d", len(got), len(want))
			}
		}
		if !deadlineOK.Load() {
			t.Errorf("Serve ctx has no sane deadline or peer is not 127.0.0.1")
		}
		waitFor(t, "open == 0", func() bool { return s.Stats().Open == 0 })
		if st := s.Stats(); st.Frames != 3 || st.Accepted != 3 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestServer_LargeReplyFullyFlushed(t *testing.T) {
	// A reply much larger than the socket send buffer must arrive whole before the close.
	forKinds(t, func(t *testing.T, k serverKind) {
		big := make([]byte, 16<<20)
		for i := range big {
			big[i] = byte(i * 7)
		}
		d := &dispatcher{serve: func(context.Context, []byte, netip.AddrPort) []byte { return encode(big) }}
		s := start(t, k, Config{ConnTimeout: time.Minute}, d)
		c := dial(t, s)
		if _, err := c.Write(encode([]byte("x"))); err != nil {
			t.Fatal(err)
		}
		// Read slowly at first so the server's outbound buffer fills up.
		first := make([]byte, 1024)
		time.Sleep(50 * time.Millisecond) // pacing: let the kernel buffers fill
		if _, err := io.ReadFull(c, first); err != nil {
			t.Fatal(err)
		}
		rest := readAll(t, c)
		if got := append(first, rest...); !bytes.Equal(got, encode(big)) {
			t.Fatalf("reply truncated or corrupted: got %d bytes, want %d", len(got), len(big)+4)
		}
	})
}

func TestServer_SplitAndCoalesced(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		t.Run("one_byte_writes", func(t *testing.T) {
			d := echo()
			s := start(t, k, Config{ConnTimeout: time.Minute}, d)
			c := dial(t, s)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			payload := []byte("split across many tiny writes")
			for _, b := range encode(payload) {
				if _, err := c.Write([]byte{b}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Microsecond) // pacing, so the server sees separate reads
			}
			if got := readAll(t, c); !bytes.Equal(got, encode(payload)) {
				t.Fatalf("got %q", got)
			}
		})
		t.Run("two_frames_one_write", func(t *testing.T) {
			d := echo()
			s := start(t, k, Config{ConnTimeout: time.Minute}, d)
			c := dial(t, s)
			both := append(encode([]byte("first")), encode([]byte("second"))...)
			if _, err := c.Write(both); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, c); !bytes.Equal(got, encode([]byte("first"))) {
				t.Fatalf("got %q, want only the first frame echoed", got)
			}
			if n := d.calls.Load(); n != 1 {
				t.Fatalf("Serve called %d times, want 1", n)
			}
		})
	})
}

func TestServer_NoReply(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		d := &dispatcher{serve: func(context.Context, []byte, netip.AddrPort) []byte { return nil }}
		s := start(t, k, Config{ConnTimeout: time.Minute}, d)
		if got := roundTrip(t, s, []byte("REQUEST_TERMINATE_JOB")); len(got) != 0 {
			t.Fatalf("got %d bytes, want none", len(got))
		}
		if d.calls.Load() != 1 {
			t.Fatalf("Serve not called")
		}
	})
}

func TestServer_Oversize(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		d := echo()
		s := start(t, k, Config{ConnTimeout: time.Minute, MaxFrame: 1024}, d)
		c := dial(t, s)
		if _, err := c.Write([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, c); len(got) != 0 {
			t.Fatalf("got %d bytes, want none", len(got))
		}
		if st := s.Stats(); st.Oversize != 1 {
			t.Fatalf("Oversize = %d, want 1", st.Oversize)
		}
		// Exactly MaxFrame is fine, and the server still serves.
		payload := bytes.Repeat([]byte{1}, 1024)
		if got := roundTrip(t, s, payload); !bytes.Equal(got, encode(payload)) {
			t.Fatalf("next client: got %d bytes", len(got))
		}
		if d.calls.Load() != 1 {
			t.Fatalf("Serve calls = %d, want 1", d.calls.Load())
		}
	})
}

func TestServer_Overloaded(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		release := make(chan struct{})
		busy := encode([]byte("BUSY"))
		d := &dispatcher{
			serve: func(_ context.Context, f []byte, _ netip.AddrPort) []byte {
				<-release
				return encode(f)
			},
			overloaded: func([]byte, netip.AddrPort) []byte { return busy },
		}
		const workers, depth = 2, 1
		s := start(t, k, Config{ConnTimeout: time.Minute, Workers: workers, QueueDepth: depth}, d)

		type result struct {
			i   int
			got []byte
		}
		results := make(chan result, workers+depth)
		var wg sync.WaitGroup
		for i := range workers + depth {
			c := dial(t, s)
			if _, err := c.Write(encode([]byte{byte(i)})); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := io.ReadAll(c)
				results <- result{i, b}
			}()
		}
		waitFor(t, "pool and queue full", func() bool {
			st := s.Stats()
			return st.InFlight == workers && st.Queued == depth
		})
		// The overflow gets the Overloaded reply right away, while the others still wait.
		if got := roundTrip(t, s, []byte("overflow")); !bytes.Equal(got, busy) {
			t.Fatalf("overflow got %q, want BUSY", got)
		}
		close(release)
		wg.Wait()
		close(results)
		for r := range results {
			if !bytes.Equal(r.got, encode([]byte{byte(r.i)})) {
				t.Errorf("client %d got %q", r.i, r.got)
			}
		}
		if st := s.Stats(); st.Rejected != 1 || st.Frames != workers+depth+1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestServer_HandlerWithinHandlerTimeout: a handler may run past ConnTimeout (a launch
// that forwards and runs the Prolog); its reply still goes out.
func TestServer_HandlerWithinHandlerTimeout(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		d := &dispatcher{serve: func(ctx context.Context, f []byte, _ netip.AddrPort) []byte {
			time.Sleep(500 * time.Millisecond)
			return encode(f)
		}}
		s := start(t, k, Config{ConnTimeout: 200 * time.Millisecond, HandlerTimeout: 5 * time.Second}, d)
		if got, want := roundTrip(t, s, []byte("slow")), encode([]byte("slow")); !bytes.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		if st := s.Stats(); st.Timeouts != 0 {
			t.Fatalf("Timeouts = %d, want 0", st.Timeouts)
		}
	})
}

func TestServer_HandlerPastHandlerTimeout(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		release := make(chan struct{})
		ctxDone := make(chan struct{})
		d := &dispatcher{serve: func(ctx context.Context, f []byte, _ netip.AddrPort) []byte {
			<-ctx.Done()
			close(ctxDone)
			<-release
			return encode(f)
		}}
		s := start(t, k, Config{ConnTimeout: 200 * time.Millisecond, HandlerTimeout: 300 * time.Millisecond}, d)
		defer close(release)
		if got := roundTrip(t, s, []byte("slow")); len(got) != 0 {
			t.Fatalf("got %q, want the connection closed without a reply", got)
		}
		<-ctxDone
		if st := s.Stats(); st.Timeouts != 1 {
			t.Fatalf("Timeouts = %d, want 1", st.Timeouts)
		}
	})
}

func TestServer_Shutdown(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		started := make(chan struct{})
		release := make(chan struct{})
		d := &dispatcher{serve: func(_ context.Context, f []byte, _ netip.AddrPort) []byte {
			close(started)
			<-release
			return encode(f)
		}}
		s := start(t, k, Config{ConnTimeout: time.Minute}, d)
		addr := s.Addr().String()
		idle := dial(t, s) // never sends: closed by Shutdown
		c := dial(t, s)
		if _, err := c.Write(encode([]byte("inflight"))); err != nil {
			t.Fatal(err)
		}
		<-started
		shutErr := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			shutErr <- s.Shutdown(ctx)
		}()
		if got := readAll(t, idle); len(got) != 0 {
			t.Fatalf("idle got %q", got)
		}
		select {
		case err := <-shutErr:
			t.Fatalf("Shutdown returned (%v) while a handler was in flight", err)
		case <-time.After(100 * time.Millisecond): // negative check: Shutdown must still wait
		}
		close(release)
		if got := readAll(t, c); !bytes.Equal(got, encode([]byte("inflight"))) {
			t.Fatalf("in-flight reply %q", got)
		}
		if err := <-shutErr; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if c2, err := net.DialTimeout("tcp", addr, testIO); err == nil {
			c2.Close()
			t.Fatalf("port still open after Shutdown")
		}
		if err := s.Shutdown(context.Background()); !errors.Is(err, ErrServerClosed) {
			t.Fatalf("second Shutdown: %v", err)
		}
	})
}

func TestServer_ShutdownDeadline(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		started := make(chan struct{})
		cancelled := make(chan struct{})
		d := &dispatcher{serve: func(ctx context.Context, _ []byte, _ netip.AddrPort) []byte {
			close(started)
			<-ctx.Done()
			close(cancelled)
			return nil
		}}
		s := start(t, k, Config{ConnTimeout: time.Minute}, d)
		c := dial(t, s)
		if _, err := c.Write(encode([]byte("stuck"))); err != nil {
			t.Fatal(err)
		}
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
		}
		select {
		case <-cancelled:
		case <-time.After(testWait):
			t.Fatal("handler ctx not cancelled after the Shutdown deadline")
		}
	})
}

func TestServer_StartPortTaken(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		s, err := k.new(Config{Addr: "tcp://" + ln.Addr().String(), Logger: testLogger()}, echo())
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start()
		if err == nil {
			_ = s.Shutdown(context.Background())
			t.Fatal("Start succeeded on a taken port")
		}
		if !errors.Is(err, syscallEADDRINUSE) {
			t.Fatalf("Start error %v does not wrap EADDRINUSE", err)
		}
		t.Logf("Start error: %v", err)
	})
}

func TestServer_CopyBeforeHandoff(t *testing.T) {
	// One loop, so every connection's bytes land in the same gnet read buffer.
	forKinds(t, func(t *testing.T, k serverKind) {
		want := make([]byte, 48<<10)
		for i := range want {
			want[i] = byte(i*31 + 7)
		}
		got := make(chan []byte, 1)
		proceed := make(chan struct{})
		first := atomic.Bool{}
		d := &dispatcher{serve: func(_ context.Context, f []byte, _ netip.AddrPort) []byte {
			if first.CompareAndSwap(false, true) {
				<-proceed // the loop receives lots of other traffic meanwhile
				got <- bytes.Clone(f)
			}
			return encode([]byte("ok"))
		}}
		s := start(t, k, Config{ConnTimeout: time.Minute, Loops: 1}, d)
		a := dial(t, s)
		if _, err := a.Write(encode(want)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "first frame in the handler", func() bool { return s.Stats().InFlight == 1 })
		// More traffic on the same connection (ignored) and on others (served).
		junk := bytes.Repeat([]byte{0xEE}, 64<<10)
		if _, err := a.Write(junk); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			junkFrame := bytes.Repeat([]byte{byte(i)}, 32<<10)
			if r := roundTrip(t, s, junkFrame); !bytes.Equal(r, encode([]byte("ok"))) {
				t.Fatalf("other client %d got %q", i, r)
			}
		}
		close(proceed)
		if f := <-got; !bytes.Equal(f, want) {
			t.Fatalf("frame changed under the handler")
		}
		if r := readAll(t, a); !bytes.Equal(r, encode([]byte("ok"))) {
			t.Fatalf("first client got %q", r)
		}
	})
}

func TestServer_DispatcherPanic(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		d := &dispatcher{serve: func(_ context.Context, f []byte, _ netip.AddrPort) []byte {
			if string(f) == "boom" {
				panic("handler bug")
			}
			return encode(f)
		}}
		s := start(t, k, Config{ConnTimeout: time.Minute, Workers: 1}, d)
		if got := roundTrip(t, s, []byte("boom")); len(got) != 0 {
			t.Fatalf("got %q after panic", got)
		}
		if got := roundTrip(t, s, []byte("fine")); !bytes.Equal(got, encode([]byte("fine"))) {
			t.Fatalf("worker lost after panic: %q", got)
		}
		if st := s.Stats(); st.Panics != 1 {
			t.Fatalf("Panics = %d", st.Panics)
		}
	})
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"host_port", Config{Addr: "127.0.0.1:6818"}, false},
		{"tcp_scheme", Config{Addr: "tcp://0.0.0.0:6818"}, false},
		{"tcp6_scheme", Config{Addr: "tcp6://[::1]:6818"}, false},
		{"empty", Config{}, true},
		{"udp", Config{Addr: "udp://0.0.0.0:6818"}, true},
		{"no_port", Config{Addr: "localhost"}, true},
		{"negative_queue", Config{Addr: ":6818", QueueDepth: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range kinds {
				_, err := k.new(tt.cfg, echo())
				if (err != nil) != tt.wantErr {
					t.Fatalf("%s: err = %v, wantErr %v", k.name, err, tt.wantErr)
				}
			}
		})
	}
	c, err := Config{Addr: ":1"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != DefaultWorkers || c.QueueDepth != 0 || c.MaxFrame != DefaultMaxFrame ||
		c.ConnTimeout != DefaultConnTimeout || c.Loops < 1 || c.Loops > maxLoops {
		t.Fatalf("defaults %+v", c)
	}
}

func TestServer_StartTwice(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		s := start(t, k, Config{}, echo())
		if err := s.Start(); !errors.Is(err, ErrAlreadyStarted) {
			t.Fatalf("second Start: %v", err)
		}
	})
}

func TestQueueDepth_FollowsConnectionCap(t *testing.T) {
	cases := []struct {
		name       string
		configured int
		maxConns   int64
		want       int
	}{
		{"configured wins", 10, 20000, 10},
		{"cap above the default", 0, 19744, 19744},
		{"small cap keeps the default", 0, 100, DefaultQueueDepth},
		{"unlimited connections", 0, 0, 16 * DefaultQueueDepth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := queueDepth(c.configured, c.maxConns); got != c.want {
				t.Fatalf("queueDepth(%d, %d) = %d, want %d", c.configured, c.maxConns, got, c.want)
			}
		})
	}
}

// TestServer_Probe: a probe answers while a worker is free; with every
// worker stuck it fails (queued behind them, or the queue full), and it
// answers again once they are free.
func TestServer_Probe(t *testing.T) {
	forKinds(t, func(t *testing.T, k serverKind) {
		release := make(chan struct{})
		d := &dispatcher{serve: func(_ context.Context, f []byte, _ netip.AddrPort) []byte {
			<-release
			return encode(f)
		}}
		s := start(t, k, Config{ConnTimeout: time.Minute, Workers: 1, QueueDepth: 1}, d)
		probe := func(wait time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			return s.Probe(ctx)
		}
		if err := probe(testIO); err != nil {
			t.Fatalf("idle server: %v", err)
		}
		c := dial(t, s)
		if _, err := c.Write(encode([]byte("stuck"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the worker busy", func() bool { return s.Stats().InFlight == 1 })
		if err := probe(50 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the only worker stuck: %v, want a deadline", err)
		}
		// That probe still waits in the one-slot queue: the queue is full.
		if err := probe(testIO); !errors.Is(err, ErrPoolFull) {
			t.Fatalf("the queue full: %v, want ErrPoolFull", err)
		}
		close(release)
		readAll(t, c)
		if err := probe(testIO); err != nil {
			t.Fatalf("after the release: %v", err)
		}
	})
}
