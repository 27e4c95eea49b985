package ctld

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeController answers like a slurmctld of release `speaks` that accepts
// the header versions in `accepts`: in kind for those; for any other
// version as that release does (closeConn: 22.05 closes the connection;
// http: 26.05's port answers HTTP 405; else 24.11's RESPONSE_SLURM_RC in its
// own version, without a credential).
type fakeController struct {
	speaks    uint16
	accepts   []uint16
	closeConn bool
	http      bool
	auth      *authtest.Fake

	mu   sync.Mutex
	seen []uint16 // header versions of the requests, in order
}

func (f *fakeController) start(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return ln.Addr().String()
}

func (f *fakeController) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	frame, err := slurmproto.ReadFrame(c, 0)
	if err != nil || len(frame) < 2 {
		return
	}
	v := uint16(frame[0])<<8 | uint16(frame[1])
	f.mu.Lock()
	f.seen = append(f.seen, v)
	f.mu.Unlock()
	ok := false
	for _, a := range f.accepts {
		ok = ok || a == v
	}
	switch {
	case ok:
		if _, err := slurmproto.DecodeMessage(frame); err != nil {
			return
		}
		body, _ := slurmproto.EncodeBody(v, slurmproto.ReturnCode{})
		h := slurmproto.Header{Version: v, MsgType: slurmproto.ResponseSlurmRC}
		if v >= slurmproto.Version2302 {
			h.Flags = slurmproto.FlagNoAuthCred
			_, _ = c.Write(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{}, body))
			return
		}
		cred, _ := f.auth.Encode(context.Background(), auth.Payload(v, uint16(h.MsgType), body, auth.HashK12), auth.UIDAny)
		_, _ = c.Write(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, body))
	case f.closeConn:
	case f.http:
		_, _ = c.Write([]byte("HTTP/1.1 405 NOT ALLOWED\r\nConnection: Close\r\n\r\n"))
	default:
		body, _ := slurmproto.EncodeBody(f.speaks, slurmproto.ReturnCode{RC: slurmproto.SlurmProtocolAuthenticationError})
		h := slurmproto.Header{Version: f.speaks, Flags: slurmproto.FlagNoAuthCred, MsgType: slurmproto.ResponseSlurmRC}
		_, _ = c.Write(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{}, body))
	}
}

func (f *fakeController) versions() []uint16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint16(nil), f.seen...)
}

func newClient(a auth.Authenticator, addr string) *Client {
	return New(a, func() Config { return Config{Hosts: []string{addr}, MessageTimeout: 5 * time.Second} }, hclog.NewNullLogger())
}

// TestNegotiate checks that the client settles on the controller's release
// from each way a real controller answers a version it cannot read, as
// measured with the real releases (slurm-24.11-26.05.md §3).
func TestNegotiate(t *testing.T) {
	cases := []struct {
		name string
		ctl  *fakeController
		want uint16
		// tries are the versions sent, in order.
		tries []uint16
	}{
		{"26.05 accepts its own", &fakeController{speaks: slurmproto.Version2605, http: true,
			accepts: []uint16{slurmproto.Version2605, slurmproto.Version2511, slurmproto.Version2505, slurmproto.Version2411}},
			slurmproto.Version2605, []uint16{slurmproto.Version2605}},
		{"24.11 answers RC in 0x2a00", &fakeController{speaks: slurmproto.Version2411,
			accepts: []uint16{slurmproto.Version2411, slurmproto.Version2405, slurmproto.Version2311, slurmproto.Version2302}},
			slurmproto.Version2411, []uint16{slurmproto.Version2605, slurmproto.Version2411}},
		{"25.11 answers RC in 0x2c00", &fakeController{speaks: slurmproto.Version2511,
			accepts: []uint16{slurmproto.Version2511, slurmproto.Version2505, slurmproto.Version2411, slurmproto.Version2405}},
			slurmproto.Version2411, []uint16{slurmproto.Version2605, slurmproto.Version2411}},
		{"22.05 closes the connection", &fakeController{speaks: slurmproto.Version2205, closeConn: true,
			accepts: []uint16{slurmproto.Version2205, slurmproto.Version2108, slurmproto.Version2011}},
			slurmproto.Version2205, []uint16{slurmproto.Version2605, slurmproto.Version2411, slurmproto.Version2205}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ctl.auth = authtest.New(0, 0)
			c := newClient(tc.ctl.auth, tc.ctl.start(t))
			var saved []uint16
			c.OnVersion = func(v uint16) { saved = append(saved, v) }
			v, err := c.Negotiate(context.Background())
			if err != nil || v != tc.want {
				t.Fatalf("Negotiate = 0x%04x, %v; want 0x%04x", v, err, tc.want)
			}
			if got := tc.ctl.versions(); !equal(got, tc.tries) {
				t.Fatalf("sent versions %04x, want %04x", got, tc.tries)
			}
			if len(saved) != 1 || saved[0] != tc.want {
				t.Fatalf("OnVersion got %04x", saved)
			}
			// Later calls use it without negotiating again.
			if _, err := c.Call(context.Background(), slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.UIDAny); err != nil {
				t.Fatal(err)
			}
			if got := tc.ctl.versions(); got[len(got)-1] != tc.want || len(got) != len(tc.tries)+1 {
				t.Fatalf("after Call: sent %04x", got)
			}
		})
	}
}

// TestNegotiate_Incompatible: a controller newer than every release the
// client speaks and older than none of them, here one that only reads
// 23.02, gets one clear error naming both versions.
func TestNegotiate_Incompatible(t *testing.T) {
	ctl := &fakeController{speaks: slurmproto.Version2302, accepts: []uint16{slurmproto.Version2302}, auth: authtest.New(0, 0)}
	c := newClient(ctl.auth, ctl.start(t))
	_, err := c.Negotiate(context.Background())
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("got %v, want ErrIncompatible", err)
	}
	if c.Version() != 0 {
		t.Fatalf("version 0x%04x after a failed negotiation", c.Version())
	}
}

// TestTryFirstAndRenegotiate: the saved release is tried first; a
// controller that changes release under a running client is followed.
func TestTryFirstAndRenegotiate(t *testing.T) {
	a := authtest.New(0, 0)
	ctl := &fakeController{speaks: slurmproto.Version2411, auth: a,
		accepts: []uint16{slurmproto.Version2411, slurmproto.Version2405, slurmproto.Version2311, slurmproto.Version2302}}
	c := newClient(a, ctl.start(t))
	c.TryFirst(slurmproto.Version2411)
	if v, err := c.Negotiate(context.Background()); err != nil || v != slurmproto.Version2411 {
		t.Fatalf("Negotiate = 0x%04x, %v", v, err)
	}
	if got := ctl.versions(); !equal(got, []uint16{slurmproto.Version2411}) {
		t.Fatalf("sent %04x, want only 0x2a00", got)
	}
	// The controller is replaced by a 22.05 one.
	ctl.mu.Lock()
	ctl.speaks, ctl.accepts, ctl.closeConn = slurmproto.Version2205, []uint16{slurmproto.Version2205}, true
	ctl.mu.Unlock()
	if _, err := c.Call(context.Background(), slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.UIDAny); err != nil {
		t.Fatalf("Call after the controller changed: %v", err)
	}
	if c.Version() != slurmproto.Version2205 {
		t.Fatalf("version 0x%04x, want 0x2600", c.Version())
	}
}

// TestPin: a pinned client never negotiates and keeps its version even when
// refused.
func TestPin(t *testing.T) {
	a := authtest.New(0, 0)
	ctl := &fakeController{speaks: slurmproto.Version2605, http: true, auth: a,
		accepts: []uint16{slurmproto.Version2605, slurmproto.Version2511, slurmproto.Version2505, slurmproto.Version2411}}
	c := newClient(a, ctl.start(t))
	c.Pin(slurmproto.Version2411)
	if _, err := c.Call(context.Background(), slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.UIDAny); err != nil {
		t.Fatal(err)
	}
	if got := ctl.versions(); !equal(got, []uint16{slurmproto.Version2411}) {
		t.Fatalf("sent %04x, want only 0x2a00", got)
	}
	c.Pin(slurmproto.Version2205)
	var ref *refusedError
	if _, err := c.Call(context.Background(), slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.UIDAny); !errors.As(err, &ref) {
		t.Fatalf("got %v, want the controller's refusal", err)
	}
	if c.Version() != slurmproto.Version2205 {
		t.Fatal("a pinned version changed")
	}
}

func equal(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
