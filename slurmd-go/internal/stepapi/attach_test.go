package stepapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestSockaddrIn_Layout: struct sockaddr_in inside a 128-byte
// sockaddr_storage as stepd_attach writes slurm_addr_t: sin_family
// AF_INET in host order, sin_port and sin_addr in network order, zeros
// after.
func TestSockaddrIn_Layout(t *testing.T) {
	b := SockaddrIn(netip.MustParseAddrPort("10.1.2.3:4567"))
	if len(b) != SockaddrStorageSize || SockaddrStorageSize != 128 {
		t.Fatalf("%d bytes", len(b))
	}
	want := make([]byte, 128)
	binary.NativeEndian.PutUint16(want, syscall.AF_INET)
	copy(want[2:], []byte{0x11, 0xd7, 10, 1, 2, 3}) // 4567 = 0x11d7
	if !bytes.Equal(b, want) {
		t.Errorf("SockaddrIn\n got %x\nwant %x", b[:16], want[:16])
	}
	// The kernel's own encoding of the same address (what a C client's
	// slurm_addr_t holds) reads back the same.
	sa := syscall.RawSockaddrInet4{Family: syscall.AF_INET, Addr: [4]byte{10, 1, 2, 3}}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	binary.BigEndian.PutUint16(raw[2:4], 4567) // sin_port is stored in network order
	if len(raw) != 16 || !bytes.Equal(b[:16], raw) {
		t.Errorf("differs from RawSockaddrInet4: %x vs %x", b[:16], raw)
	}

	// An IPv4-mapped IPv6 address is the IPv4 address.
	if m := SockaddrIn(netip.MustParseAddrPort("[::ffff:10.1.2.3]:4567")); !bytes.Equal(m, b) {
		t.Errorf("mapped: %x", m[:16])
	}
	// No IPv4 address: all zero (AF_UNSPEC).
	for _, ap := range []netip.AddrPort{{}, netip.MustParseAddrPort("[2001:db8::1]:22")} {
		if z := SockaddrIn(ap); len(z) != 128 || !bytes.Equal(z, make([]byte, 128)) {
			t.Errorf("SockaddrIn(%v) = %x", ap, z[:16])
		}
	}
}

// TestParseSockaddrIn: the inverse of SockaddrIn; anything that is not
// AF_INET or shorter than a sockaddr_in is refused.
func TestParseSockaddrIn(t *testing.T) {
	for _, s := range []string{"10.1.2.3:4567", "127.0.0.1:0", "0.0.0.0:65535", "255.255.255.255:1"} {
		ap := netip.MustParseAddrPort(s)
		got, ok := ParseSockaddrIn(SockaddrIn(ap))
		if !ok || got != ap {
			t.Errorf("round trip %s: %v %v", s, got, ok)
		}
	}
	if got, ok := ParseSockaddrIn(SockaddrIn(netip.MustParseAddrPort("10.0.0.1:80"))[:8]); !ok || got.String() != "10.0.0.1:80" {
		t.Errorf("8 bytes: %v %v", got, ok)
	}
	unspec := make([]byte, 128)
	inet6 := make([]byte, 128)
	binary.NativeEndian.PutUint16(inet6, syscall.AF_INET6)
	swapped := SockaddrIn(netip.MustParseAddrPort("10.0.0.1:80"))
	swapped[0], swapped[1] = swapped[1], swapped[0] // family in the wrong byte order
	for name, b := range map[string][]byte{"unspec": unspec, "inet6": inet6, "short": SockaddrIn(netip.MustParseAddrPort("10.0.0.1:80"))[:7], "nil": nil, "swapped family": swapped} {
		if got, ok := ParseSockaddrIn(b); ok {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
}

// pairConn returns a Conn on one end of a unix socket pair (the handshake
// skipped) and the other end for a fake step manager.
func pairConn(t *testing.T) (*Conn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	c := &Conn{c: conns[0], path: "socketpair", version: ProtocolVersion}
	c.w.RW = c.c
	return c, conns[1]
}

// attachReq is a REQUEST_ATTACH as the step manager reads it
// (slurmstepd/req.c _handle_attach, 22.05 layout).
type attachReq struct {
	req      int32
	io, resp []byte // raw slurm_addr_t
	key      []byte
	uid      uint32
	version  uint16
}

// readAttachReq reads one REQUEST_ATTACH from the server end.
func readAttachReq(t *testing.T, s *net.UnixConn) attachReq {
	t.Helper()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	w := Wire{RW: s}
	var r attachReq
	var err error
	if r.req, err = w.ReadInt32(); err != nil {
		t.Fatalf("request: %v", err)
	}
	if r.io, err = w.ReadBytes(128); err != nil {
		t.Fatalf("io addr: %v", err)
	}
	if r.resp, err = w.ReadBytes(128); err != nil {
		t.Fatalf("resp addr: %v", err)
	}
	n, err := w.ReadUint32()
	if err != nil {
		t.Fatalf("key length: %v", err)
	}
	if r.key, err = w.ReadBytes(int(n)); err != nil {
		t.Fatalf("key: %v", err)
	}
	if r.uid, err = w.ReadUint32(); err != nil {
		t.Fatalf("uid: %v", err)
	}
	if r.version, err = w.ReadUint16(); err != nil {
		t.Fatalf("version: %v", err)
	}
	return r
}

// stockAttachReply is what the stock stepd writes after rc 0: u32 ntasks,
// ntasks u32 pids, ntasks u32 gtids, then per task an int length and the
// executable with its NUL (length 0 for a task without argv).
func stockAttachReply(pids, gtids []uint32, exes []string) []byte {
	var o Out
	o.Int32(0)
	o.Uint32(uint32(len(pids)))
	for _, p := range pids {
		o.Uint32(p)
	}
	for _, g := range gtids {
		o.Uint32(g)
	}
	for _, e := range exes {
		if e == "" {
			o.Int32(0)
			continue
		}
		o.Int32(int32(len(e) + 1))
		o.Bytes(append([]byte(e), 0))
	}
	return o.B
}

// TestAttach_Stock: Attach sends stepd_attach's 22.05 request (int
// REQUEST_ATTACH, two raw 128-byte addresses, u32 key length, key, uid,
// u16 protocol version: nothing more) and decodes the stock reply.
func TestAttach_Stock(t *testing.T) {
	c, srv := pairConn(t)
	ioAddr := netip.MustParseAddrPort("192.168.7.8:40001")
	respAddr := netip.MustParseAddrPort("192.168.7.8:40002")
	key := []byte("MUNGE:fake-sattach-cred:\x00")
	type result struct {
		r   *AttachResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.Attach(ctx, ioAddr, respAddr, key, 1002)
		done <- result{r, err}
	}()
	req := readAttachReq(t, srv)
	if req.req != 7 || req.uid != 1002 || req.version != 0x2600 || !bytes.Equal(req.key, key) {
		t.Errorf("request %+v", req)
	}
	if !bytes.Equal(req.io, SockaddrIn(ioAddr)) || !bytes.Equal(req.resp, SockaddrIn(respAddr)) {
		t.Errorf("addresses %x / %x", req.io[:8], req.resp[:8])
	}
	// Nothing follows the version.
	_ = srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := srv.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("extra request bytes: %d %v", n, err)
	}
	if _, err := srv.Write(stockAttachReply([]uint32{9627, 9628, 9629}, []uint32{0, 2, 4}, []string{"sleep", "", "/usr/bin/a.out"})); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("Attach: %v", res.err)
	}
	r := res.r
	if r.RC != 0 || !slices.Equal(r.PIDs, []uint32{9627, 9628, 9629}) || !slices.Equal(r.GTIDs, []uint32{0, 2, 4}) ||
		!slices.Equal(r.Executables, []string{"sleep", "", "/usr/bin/a.out"}) {
		t.Errorf("result %+v", r)
	}

	// No tasks.
	go func() {
		r, err := c.Attach(context.Background(), ioAddr, respAddr, nil, 0)
		done <- result{r, err}
	}()
	if req := readAttachReq(t, srv); len(req.key) != 0 || req.uid != 0 {
		t.Errorf("second request %+v", req)
	}
	if _, err := srv.Write(stockAttachReply(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.r.RC != 0 || len(res.r.PIDs) != 0 || len(res.r.GTIDs) != 0 || len(res.r.Executables) != 0 {
		t.Errorf("no tasks: %+v, %v", res.r, res.err)
	}
}

// TestAttach_Refused: on a non-zero rc the stock stepd sends nothing
// else; Attach returns the rc without an error and reads no further (the
// connection stays usable).
func TestAttach_Refused(t *testing.T) {
	c, srv := pairConn(t)
	for _, rc := range []int32{4019 /* ESLURMD_JOB_NOTRUNNING */, int32(syscall.EPERM), -1} {
		done := make(chan *AttachResult, 1)
		go func() {
			r, err := c.Attach(context.Background(), netip.MustParseAddrPort("10.0.0.1:1"), netip.AddrPort{}, []byte("k"), 5)
			if err != nil {
				t.Errorf("rc %d: %v", rc, err)
			}
			done <- r
		}()
		req := readAttachReq(t, srv)
		if !bytes.Equal(req.resp, make([]byte, 128)) {
			t.Errorf("zero resp address sent as %x", req.resp[:8])
		}
		var o Out
		o.Int32(rc)
		if _, err := srv.Write(o.B); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r == nil || r.RC != rc || r.PIDs != nil || r.GTIDs != nil || r.Executables != nil {
				t.Errorf("rc %d: %+v", rc, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("rc %d: Attach waits for more than the rc", rc)
		}
	}
	// Still in step: a State request after the refusals.
	go func() {
		w := Wire{RW: srv}
		if req, err := w.ReadInt32(); err != nil || req != int32(RequestState) {
			t.Errorf("next request %d %v", req, err)
		}
		var o Out
		o.Int32(int32(StateRunning))
		_, _ = srv.Write(o.B)
	}()
	if st, err := c.State(context.Background()); err != nil || st != StateRunning {
		t.Errorf("State after refusals: %v %v", st, err)
	}
}

// TestAttach_Truncated: a reply cut anywhere is an error naming the
// request, not a partial result.
func TestAttach_Truncated(t *testing.T) {
	full := stockAttachReply([]uint32{1, 2}, []uint32{3, 4}, []string{"a", "bb"})
	for _, cut := range []int{0, 2, 4, 8, 12, 16, 20, 24, 26, 30, len(full) - 1} {
		c, srv := pairConn(t)
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := c.Attach(ctx, netip.AddrPort{}, netip.AddrPort{}, nil, 0)
			if err == nil {
				err = errors.New("no error")
				t.Errorf("cut %d: result %+v", cut, r)
			}
			done <- err
		}()
		readAttachReq(t, srv)
		if _, err := srv.Write(full[:cut]); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		select {
		case err := <-done:
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("cut %d: %v", cut, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("cut %d: Attach did not return", cut)
		}
	}
}

// TestAttach_Bounds: a task count or a name length no stepd would send is
// refused before allocating.
func TestAttach_Bounds(t *testing.T) {
	for name, reply := range map[string][]byte{
		"ntasks": func() []byte { var o Out; o.Int32(0); o.Uint32(1 << 30); return o.B }(),
		"name length": func() []byte {
			var o Out
			o.Int32(0)
			o.Uint32(1)
			o.Uint32(1)
			o.Uint32(0)
			o.Int32(MaxWireString + 1)
			return o.B
		}(),
		"negative name length": func() []byte {
			var o Out
			o.Int32(0)
			o.Uint32(1)
			o.Uint32(1)
			o.Uint32(0)
			o.Int32(-5)
			return o.B
		}(),
	} {
		c, srv := pairConn(t)
		done := make(chan error, 1)
		go func() {
			_, err := c.Attach(context.Background(), netip.AddrPort{}, netip.AddrPort{}, nil, 0)
			done <- err
		}()
		readAttachReq(t, srv)
		if _, err := srv.Write(reply); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Attach did not return", name)
		}
	}
}
