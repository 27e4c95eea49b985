package rpcserver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestOnReplySent: a handler that asks to be told gets nil once its reply was written and
// the client read it, ErrNotSent when it answered nothing, and an error when the client had
// reset the connection before the reply was written (slurmd rewinds a launch's credential
// then). Both server kinds.
func TestOnReplySent(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			outcome := make(chan error, 1)
			release := make(chan struct{})
			d := &dispatcher{serve: func(ctx context.Context, f []byte, _ netip.AddrPort) []byte {
				if !OnReplySent(ctx, func(err error) { outcome <- err }) {
					t.Error("OnReplySent: ctx is not a request's")
				}
				switch string(f) {
				case "silent":
					return nil
				case "wait":
					select {
					case <-release:
					case <-time.After(testWait):
						t.Error("handler never released")
					}
				}
				return encode(f)
			}}
			s := start(t, k, Config{}, d)
			get := func(t *testing.T, what string) error {
				t.Helper()
				select {
				case err := <-outcome:
					return err
				case <-time.After(testWait):
					t.Fatalf("%s: no OnReplySent report", what)
					return nil
				}
			}

			c := dial(t, s)
			if _, err := c.Write(encode([]byte("hello"))); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, c); string(got) != string(encode([]byte("hello"))) {
				t.Fatalf("reply %q", got)
			}
			if err := get(t, "answered"); err != nil {
				t.Fatalf("answered: report %v, want nil", err)
			}

			c = dial(t, s)
			if _, err := c.Write(encode([]byte("silent"))); err != nil {
				t.Fatal(err)
			}
			readAll(t, c)
			if err := get(t, "silent"); !errors.Is(err, ErrNotSent) {
				t.Fatalf("no reply: report %v, want ErrNotSent", err)
			}

			// The client resets the connection while its request is being served.
			c = dial(t, s)
			if _, err := c.Write(encode([]byte("wait"))); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the third request to be served", func() bool { return d.calls.Load() == 3 })
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
			time.Sleep(200 * time.Millisecond) // the reset reaches the server's socket
			close(release)
			if err := get(t, "reset"); err == nil {
				t.Fatal("client gone: report nil, want an error")
			}
			// Exactly one report per request.
			select {
			case err := <-outcome:
				t.Fatalf("a second report: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}
