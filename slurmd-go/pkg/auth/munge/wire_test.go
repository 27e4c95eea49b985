package munge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

func TestEncodeRequest_Layout(t *testing.T) {
	got := encodeRequest(2, []byte("hi"), -1, 1000)
	want := []byte{
		0x00, 0x60, 0x6d, 0x4b, 4, msgEncReq, 2, 0, 0, 0, 22, // header: magic, version, type, retry, body length
		1, 1, 1, 0, // cipher, mac, zip defaults; no realm
		0xff, 0xff, 0xff, 0xff, // ttl -1: munged's maximum
		0, 0, 0x03, 0xe8, // auth_uid 1000
		0xff, 0xff, 0xff, 0xff, // auth_gid any
		0, 0, 0, 2, 'h', 'i',
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode request\n got % x\nwant % x", got, want)
	}
}

func TestDecodeRequest_Layout(t *testing.T) {
	got := decodeRequest(0, "MUNGE:x:")
	want := append([]byte{0x00, 0x60, 0x6d, 0x4b, 4, msgDecReq, 0, 0, 0, 0, 13, 0, 0, 0, 9}, "MUNGE:x:\x00"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("decode request\n got % x\nwant % x", got, want)
	}
}

// decodeRsp builds a MUNGE_MSG_DEC_RSP body as munged packs it.
func decodeRsp(code uint8, msg string, uid, gid, t0, t1 uint32, data []byte) []byte {
	var b []byte
	b = append(b, code)
	if msg != "" {
		b = append(b, byte(len(msg)+1))
		b = append(b, msg...)
		b = append(b, 0)
	} else {
		b = append(b, 0)
	}
	b = append(b, 4, 2, 1)                    // cipher, mac, zip
	b = append(b, 0)                          // realm
	b = binary.BigEndian.AppendUint32(b, 300) // ttl
	b = append(b, 4, 127, 0, 0, 1)            // address
	for _, v := range []uint32{t0, t1, uid, gid, uidAny, uidAny, uint32(len(data))} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return append(b, data...)
}

func TestDecodeResponse(t *testing.T) {
	r, err := decodeResponse(decodeRsp(eCredReplayed, "Replayed credential", 7, 8, 100, 101, []byte("payload")))
	if err != nil {
		t.Fatal(err)
	}
	if r.code != eCredReplayed || r.msg != "Replayed credential" || r.uid != 7 || r.gid != 8 ||
		r.encodedAt != 100 || r.decodedAt != 101 || string(r.payload) != "payload" {
		t.Fatalf("got %+v", r)
	}
	if r, err := decodeResponse(decodeRsp(eSuccess, "", 0, 0, 1, 1, nil)); err != nil || r.payload != nil {
		t.Fatalf("empty payload: %+v, %v", r, err)
	}
	// An error response cut after its message still names the error.
	if r, err := decodeResponse([]byte{eCredInvalid, 4, 'b', 'a', 'd', 0}); err != nil || r.code != eCredInvalid || r.msg != "bad" {
		t.Fatalf("short error response: %+v, %v", r, err)
	}
	full := decodeRsp(eSuccess, "", 0, 0, 1, 1, []byte("abc"))
	if _, err := decodeResponse(full[:len(full)-1]); !errors.Is(err, errShort) {
		t.Fatalf("truncated success: %v", err)
	}
}

func TestEncodeResponse(t *testing.T) {
	body := []byte{0, 0, 0, 0, 0, 9}
	body = append(body, "MUNGE:ab:\x00"...)
	body[5] = 10
	r, err := encodeResponse(body)
	if err != nil || r.code != eSuccess || r.cred != "MUNGE:ab:" {
		t.Fatalf("got %+v, %v", r, err)
	}
	if _, err := encodeResponse([]byte{0, 0, 0, 0, 0, 0}); err == nil {
		t.Fatal("success without a credential accepted")
	}
	if _, err := encodeResponse([]byte{0, 0, 0, 0}); !errors.Is(err, errShort) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestParseHeader(t *testing.T) {
	h := header(msgDecRsp, 0, 42)
	if n, err := parseHeader(h, msgDecRsp); err != nil || n != 42 {
		t.Fatalf("n %d err %v", n, err)
	}
	for name, mut := range map[string]func([]byte){
		"magic":   func(b []byte) { b[0] = 1 },
		"version": func(b []byte) { b[4] = 3 },
		"type":    func(b []byte) { b[5] = msgEncRsp },
		"length":  func(b []byte) { binary.BigEndian.PutUint32(b[7:], maxResponse+1) },
	} {
		b := header(msgDecRsp, 0, 42)
		mut(b)
		if _, err := parseHeader(b, msgDecRsp); err == nil {
			t.Errorf("%s: bad header accepted", name)
		}
	}
}

// fakeMunged serves one scripted reaction per connection on a unix socket and records the
// requests' retry counts.
func fakeMunged(t *testing.T, react []func(c net.Conn, req []byte)) (string, <-chan uint8) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "munge.socket")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	retries := make(chan uint8, len(react))
	go func() {
		for _, f := range react {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var h [msgHdrSize]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				c.Close()
				continue
			}
			body := make([]byte, binary.BigEndian.Uint32(h[7:]))
			_, _ = io.ReadFull(c, body)
			retries <- h[6]
			f(c, body)
			c.Close()
		}
	}()
	return sock, retries
}

// A connection munged drops mid-transaction is tried again with the retry count set, as
// libmunge does, so munged does not report the retried decode as a replay.
func TestTransaction_RetriesWithCount(t *testing.T) {
	drop := func(net.Conn, []byte) {}
	answer := func(c net.Conn, _ []byte) {
		body := decodeRsp(eSuccess, "", 5, 6, 1, 1, []byte("p"))
		_, _ = c.Write(append(header(msgDecRsp, 0, len(body)), body...))
	}
	sock, retries := fakeMunged(t, []func(net.Conn, []byte){drop, drop, answer})
	m := newMunge(t, Options{Socket: sock})
	c, err := m.Decode(context.Background(), "MUNGE:x:")
	if err != nil || c.UID != 5 || string(c.Payload) != "p" {
		t.Fatalf("got %+v, %v", c, err)
	}
	for want := uint8(0); want < 3; want++ {
		if got := <-retries; got != want {
			t.Fatalf("attempt %d sent retry %d", want, got)
		}
	}
}

// A munged that never answers costs the socket timeout per attempt, unless ctx ends first.
func TestTransaction_CtxEndsSilentMunged(t *testing.T) {
	hang := func(c net.Conn, _ []byte) { time.Sleep(3 * time.Second) }
	sock, _ := fakeMunged(t, []func(net.Conn, []byte){hang})
	m := newMunge(t, Options{Socket: sock})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Encode(ctx, nil, auth.UIDAny)
	if !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("returned after %v", d)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(decodeRsp(eSuccess, "", 1, 2, 3, 4, []byte("x")))
	f.Add([]byte{eCredInvalid, 4, 'b', 'a', 'd', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeResponse(b)
		_, _ = encodeResponse(b)
	})
}

// A failed connect is explained as libmunge explains it; the path is looked at only then.
func TestConnect_ErrorNamesCause(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		regular:                       `Invalid file type for socket "` + regular + `"`,
		filepath.Join(dir, "missing"): "(Did you start munged?)",
	} {
		_, r, stage := newMunge(t, Options{Socket: path}).connect(context.Background())
		if stage != "" || r.code != eSocket || !strings.Contains(r.msg, want) {
			t.Errorf("%s: code %d stage %q msg %q, want %q", path, r.code, stage, r.msg, want)
		}
	}
}
