package stepio

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// The reference's verified init message: 572-byte munge signature incl. NUL.
func TestInitMsg_Marshal_Reference(t *testing.T) {
	key := append([]byte("MUNGE:"+strings.Repeat("A", 565)), 0)
	if len(key) != 0x23c {
		t.Fatalf("key length %d", len(key))
	}
	m := InitMsg{Version: ProtocolVersion, NodeID: 0, StdoutObjs: 1, StderrObjs: 1, IOKey: key}
	b, err := m.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	want := unhex(t, "0000024e 2600 00000000 00000001 00000001 0000023c 4d554e47453a")
	if !bytes.HasPrefix(b, want) {
		t.Fatalf("prefix\n got %x\nwant %x", b[:len(want)], want)
	}
	if len(b) != 4+0x24e {
		t.Fatalf("length %d, want %d", len(b), 4+0x24e)
	}
	got, err := ReadInit(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("ReadInit: %v", err)
	}
	if got.Version != m.Version || got.NodeID != m.NodeID || got.StdoutObjs != 1 || got.StderrObjs != 1 || !bytes.Equal(got.IOKey, key) {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestInitMsg_Marshal_Cases(t *testing.T) {
	cases := []struct {
		name string
		msg  InitMsg
		want string
	}{
		{
			name: "22.05 small key",
			msg:  InitMsg{Version: 0x2600, NodeID: 3, StdoutObjs: 2, StderrObjs: 0, IOKey: []byte("k\x00")},
			want: "00000014 2600 00000003 00000002 00000000 00000002 6b00",
		},
		{
			name: "22.05 empty key",
			msg:  InitMsg{Version: 0x2600, NodeID: 1},
			want: "00000012 2600 00000001 00000000 00000000 00000000",
		},
		{
			name: "legacy short key padded",
			msg:  InitMsg{Version: LegacyIOVersion, NodeID: 3, StdoutObjs: 2, StderrObjs: 1, IOKey: []byte("abc")},
			want: "b001 00000003 00000002 00000001 00000008 6162630000000000",
		},
		{
			name: "legacy long key cut",
			msg:  InitMsg{Version: LegacyIOVersion, IOKey: []byte("0123456789")},
			want: "b001 00000000 00000000 00000000 00000008 3031323334353637",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.msg.Marshal()
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if want := unhex(t, tc.want); !bytes.Equal(b, want) {
				t.Fatalf("\n got %x\nwant %x", b, want)
			}
		})
	}
}

func TestInitMsg_Marshal_BadVersion(t *testing.T) {
	if _, err := (InitMsg{Version: 0x2300}).Marshal(); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("err = %v, want ErrBadVersion", err)
	}
}

func TestParseInit_Errors(t *testing.T) {
	cases := []struct {
		name string
		body string
		want error
	}{
		{"legacy version", "b001 00000000 00000000 00000000 00000008 0000000000000000", ErrBadVersion},
		{"too old", "2300 00000000 00000000 00000000 00000000", ErrBadVersion},
		{"empty", "", ErrShortBuffer},
		{"short fields", "2600 00000000", ErrShortBuffer},
		{"key past end", "2600 00000000 00000000 00000000 00000005 6161", ErrShortBuffer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseInit(unhex(t, tc.body)); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReadInit_TooLong(t *testing.T) {
	if _, err := ReadInit(bytes.NewReader(unhex(t, "00100001"))); !errors.Is(err, ErrInitTooLong) {
		t.Fatalf("err = %v, want ErrInitTooLong", err)
	}
}

func TestInitVersion(t *testing.T) {
	for _, tc := range []struct{ srun, want uint16 }{
		{0x2600, ProtocolVersion}, {0x2500, ProtocolVersion}, {0x2400, LegacyIOVersion},
	} {
		if got := InitVersion(tc.srun); got != tc.want {
			t.Errorf("InitVersion(%#x) = %#x, want %#x", tc.srun, got, tc.want)
		}
	}
}

func TestHeader_Append(t *testing.T) {
	cases := []struct {
		name string
		h    Header
		want string
	}{
		{"ALLSTDIN EOF from srun", Header{Type: TypeAllStdin, GTaskID: AllTasks, LTaskID: AllTasks}, "0003 ffff ffff 00000000"},
		{"stdout frame header", Header{Type: TypeStdout, Length: 0x3df}, "0001 0000 0000 000003df"},
		{"stdout EOF", Header{Type: TypeStdout}, "0001 0000 0000 00000000"},
		{"stderr EOF", Header{Type: TypeStderr}, "0002 0000 0000 00000000"},
		{"connection test", Header{Type: TypeConnectionTest}, "0004 0000 0000 00000000"},
		{"stdin to task 258", Header{Type: TypeStdin, GTaskID: 258, LTaskID: AllTasks, Length: 5}, "0000 0102 ffff 00000005"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.want)
			if got := tc.h.Append(nil); !bytes.Equal(got, want) {
				t.Fatalf("Append\n got %x\nwant %x", got, want)
			}
			back, err := ParseHeader(want)
			if err != nil || back != tc.h {
				t.Fatalf("ParseHeader = %+v, %v; want %+v", back, err, tc.h)
			}
		})
	}
}

func TestReadFrame(t *testing.T) {
	buf := make([]byte, MaxMsgLen)
	stream := unhex(t, "0000 0005 ffff 00000003 616263 0003 ffff ffff 00000000")
	r := bytes.NewReader(stream)
	h, p, err := ReadFrame(r, buf)
	if err != nil || h != (Header{Type: TypeStdin, GTaskID: 5, LTaskID: 0xffff, Length: 3}) || string(p) != "abc" {
		t.Fatalf("frame 1: %+v %q %v", h, p, err)
	}
	h, p, err = ReadFrame(r, buf)
	if err != nil || h.Type != TypeAllStdin || len(p) != 0 {
		t.Fatalf("frame 2: %+v %q %v", h, p, err)
	}
	if _, _, err := ReadFrame(r, buf); !errors.Is(err, io.EOF) {
		t.Fatalf("at end: %v", err)
	}
}

func TestReadFrame_Errors(t *testing.T) {
	buf := make([]byte, MaxMsgLen)
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"too long", "0001 0000 0000 00000401", ErrFrameTooLong},
		{"short payload", "0001 0000 0000 00000004 6161", io.ErrUnexpectedEOF},
		{"short header", "0001 0000", io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := ReadFrame(bytes.NewReader(unhex(t, tc.in)), buf); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAppendFrame_TooLong(t *testing.T) {
	if _, err := AppendFrame(nil, Header{Type: TypeStdout}, make([]byte, MaxMsgLen+1)); !errors.Is(err, ErrFrameTooLong) {
		t.Fatalf("err = %v", err)
	}
	f, err := AppendFrame(nil, Header{Type: TypeStdout, Length: 99}, make([]byte, MaxMsgLen))
	if err != nil || len(f) != MaxFrameLen {
		t.Fatalf("full frame: len %d, %v", len(f), err)
	}
	if h, _ := ParseHeader(f); h.Length != MaxMsgLen {
		t.Fatalf("Length not taken from payload: %d", h.Length)
	}
}

func FuzzParseInit(f *testing.F) {
	f.Add(mustHex("2600 00000000 00000001 00000001 00000002 6b00"))
	f.Add([]byte{0xb0, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseInit(body)
		if err != nil {
			return
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		back, err := ReadInit(bytes.NewReader(b))
		if err != nil || back.NodeID != m.NodeID || !bytes.Equal(back.IOKey, m.IOKey) {
			t.Fatalf("round trip: %+v %v", back, err)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add(mustHex("0000 0005 ffff 00000003 616263"))
	f.Fuzz(func(t *testing.T, in []byte) {
		buf := make([]byte, MaxMsgLen)
		h, p, err := ReadFrame(bytes.NewReader(in), buf)
		if err != nil {
			return
		}
		if int(h.Length) != len(p) || len(p) > MaxMsgLen {
			t.Fatalf("header %+v, payload %d", h, len(p))
		}
	})
}
