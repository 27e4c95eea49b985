package sockserve

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

const testWait = 5 * time.Second // bounds every wait of these tests

func listen(t *testing.T) *net.UnixListener {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func dial(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", ln.Addr().String(), testWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func serve(t *testing.T, s *Server, ln net.Listener) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	return done
}

func wantClosed(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Serve: %v, want ErrClosed", err)
		}
	case <-time.After(testWait):
		t.Fatal("Serve did not return")
	}
}

// At most maxConns handlers run at once; the others wait until one ends.
func TestServe_BoundsConnections(t *testing.T) {
	const maxConns = 2
	var active, peak atomic.Int32
	release := make(chan struct{})
	s := New(maxConns, func(_ context.Context, c net.Conn) {
		defer c.Close()
		n := active.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		active.Add(-1)
		c.Write([]byte("x"))
	})
	ln := listen(t)
	done := serve(t, s, ln)
	var cs []net.Conn
	for i := 0; i < maxConns+2; i++ {
		cs = append(cs, dial(t, ln))
	}
	deadline := time.Now().Add(testWait)
	for active.Load() < maxConns && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if a := active.Load(); a != maxConns {
		t.Fatalf("%d handlers running, want %d", a, maxConns)
	}
	close(release)
	for i, c := range cs {
		c.SetReadDeadline(time.Now().Add(testWait))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	if p := peak.Load(); p != maxConns {
		t.Errorf("peak %d handlers at once, want %d", p, maxConns)
	}
	s.Close()
	wantClosed(t, done)
}

// Shutdown waits for the connection being served; with its context over
// it returns the context's error.
func TestShutdown_WaitsForConnections(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s := New(4, func(_ context.Context, c net.Conn) {
		defer c.Close()
		close(started)
		<-release
	})
	ln := listen(t)
	done := serve(t, s, ln)
	dial(t, ln)
	<-started
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a handler running: %v, want DeadlineExceeded", err)
	}
	close(release)
	ctx, cancel2 := context.WithTimeout(context.Background(), testWait)
	defer cancel2()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	wantClosed(t, done)
	if _, err := net.DialTimeout("unix", ln.Addr().String(), testWait); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
}

// The context's end stops Serve; Serve after Close closes its listener.
func TestServe_ContextAndClosed(t *testing.T) {
	s := New(1, func(_ context.Context, c net.Conn) { c.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, listen(t)) }()
	cancel()
	wantClosed(t, done)
	ln := listen(t)
	if err := s.Serve(context.Background(), ln); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("Serve after Close left its listener open")
	}
}

type failingListener struct {
	net.Listener
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	return nil, errors.New("broken")
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// A timeout is retried; any other accept error stops Serve, wrapped.
func TestServe_AcceptErrors(t *testing.T) {
	s := New(1, func(_ context.Context, c net.Conn) { c.Close() })
	l := &failingListener{Listener: listen(t), errs: []error{timeoutErr{}, timeoutErr{}}}
	err := s.Serve(context.Background(), l)
	if err == nil || errors.Is(err, ErrClosed) || err.Error() != "accept: broken" {
		t.Fatalf("Serve: %v, want accept: broken", err)
	}
}
