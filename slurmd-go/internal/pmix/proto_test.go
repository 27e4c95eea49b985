package pmix

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func TestFrame_RoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := writeFrame(&b, msgFenceResult, u32(7), u32(0), []byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := writeFrame(&b, msgQuit); err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 13, 'F', 0, 0, 0, 7, 0, 0, 0, 0, 'd', 'a', 't', 'a', 0, 0, 0, 1, 'Q'}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("wire %v, want %v", b.Bytes(), want)
	}
	f, err := readFrame(&b)
	if err != nil {
		t.Fatal(err)
	}
	id, st, data, err := idStatus(f)
	if err != nil || f.typ != msgFenceResult || id != 7 || st != 0 || string(data) != "data" {
		t.Fatalf("frame %c id %d status %d data %q err %v", f.typ, id, st, data, err)
	}
	if f, err = readFrame(&b); err != nil || f.typ != msgQuit || len(f.payload) != 0 {
		t.Fatalf("quit frame %+v err %v", f, err)
	}
	if _, err := readFrame(&b); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestReadFrame_Bad(t *testing.T) {
	over := binary.BigEndian.AppendUint32(nil, maxFrame+1)
	cases := []struct {
		name string
		in   []byte
	}{
		{"zero length", []byte{0, 0, 0, 0}},
		{"over the bound", over},
		{"cut short", []byte{0, 0, 0, 9, 'F', 1}},
		{"header cut", []byte{0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readFrame(bytes.NewReader(c.in))
			if err == nil {
				t.Fatal("no error")
			}
			if c.name != "header cut" && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
		})
	}
}

func TestParseFence(t *testing.T) {
	p := append(u32(3), 1)
	p = append(p, u32(2)...)
	p = append(append(p, u32(0)...), u32(5)...)
	m, err := parseFence(frame{typ: msgFence, payload: append(p, "blob"...)})
	if err != nil || m.id != 3 || !m.collect || len(m.ranks) != 2 || m.ranks[1] != 5 || string(m.data) != "blob" {
		t.Fatalf("fence %+v err %v", m, err)
	}
	// a rank count the payload cannot hold
	bad := append(append(u32(3), 0), u32(1<<30)...)
	if _, err := parseFence(frame{typ: msgFence, payload: bad}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("huge rank count: %v", err)
	}
	if _, err := parseFence(frame{typ: msgFence, payload: []byte{1}}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("short fence: %v", err)
	}
}

func TestCStrings(t *testing.T) {
	s, err := cstrings([]byte("A=1\x00B=\x00"))
	if err != nil || len(s) != 2 || s[0] != "A=1" || s[1] != "B=" {
		t.Fatalf("%q %v", s, err)
	}
	if _, err := cstrings([]byte("A=1")); !errors.Is(err, ErrProtocol) {
		t.Fatalf("unterminated: %v", err)
	}
}
