package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testdata = "../../testdata"

func readFrame(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenFiles is every committed frame: testdata/*.bin and one level of
// subdirectories (launch_tasks/, r2411/munge/, ...), credential payloads
// excluded.
func goldenFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(testdata, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "fuzz" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".bin") && !strings.Contains(d.Name(), "cred_payload") &&
			!strings.Contains(d.Name(), "cred-payload") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 40 {
		t.Fatalf("only %d golden frames found under %s", len(out), testdata)
	}
	return out
}

// TestCheckFile_Golden: every committed golden file is exactly one frame
// whose length prefix is its size - 4 and whose auth block ends where its
// body begins (or one io_init_msg).
func TestCheckFile_Golden(t *testing.T) {
	for _, f := range goldenFiles(t) {
		if err := checkFile(f); err != nil {
			t.Error(err)
		}
	}
}

func TestRawParse_2205Frame(t *testing.T) {
	h, err := rawParse(readFrame(t, "req_ping_fwd_v2600.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 0x2600 || h.MsgType != 1008 || h.FwdCnt != 1 || h.FwdNodes != "g2" || h.TreeWidth != 1 ||
		h.AuthPlugin != 101 || !strings.HasPrefix(h.AuthCred, "MUNGE:") || len(h.Body) != 0 ||
		!bytes.Equal(h.RetAndOrig, []byte{0, 0}) {
		t.Fatalf("header %+v", h)
	}
	h, err = rawParse(readFrame(t, "slurm_rc_retlist_v2600.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if h.RetCnt != 1 || !bytes.Equal(h.Body, []byte{0, 0, 0x0f, 0xa2}) {
		t.Fatalf("header %+v", h)
	}
}

// frame builds a ≥0x2A00 frame by hand: header, optional munge-like auth, body.
func frame(version, flags, msgType uint16, fwd string, auth string, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, msgType)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	str := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)+1))
		b = append(append(b, s...), 0)
	}
	if fwd == "" {
		b = binary.BigEndian.AppendUint16(b, 0)
	} else {
		b = binary.BigEndian.AppendUint16(b, 1)
		str(fwd)
		b = binary.BigEndian.AppendUint32(b, 10000)
		b = binary.BigEndian.AppendUint16(b, 1)
		if flags&flagPackAddrs != 0 {
			str("netcred")
		}
		b = binary.BigEndian.AppendUint16(b, 2) // tree_depth
	}
	b = binary.BigEndian.AppendUint16(b, 0) // ret_cnt
	b = binary.BigEndian.AppendUint16(b, 0) // orig_addr AF_UNSPEC
	if flags&flagNoAuthCred == 0 {
		b = binary.BigEndian.AppendUint32(b, 101)
		str(auth)
	}
	b = append(b, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func TestRawParse_2411Layout(t *testing.T) {
	body := []byte{0, 0, 0, 0}
	h, err := rawParse(frame(0x2a00, flagPackAddrs, 6001, "n2", "MUNGE:abc:", body))
	if err != nil {
		t.Fatal(err)
	}
	if h.FwdNodes != "n2" || h.NetCred != "netcred" || h.TreeDepth != 2 || h.AuthCred != "MUNGE:abc:" || !bytes.Equal(h.Body, body) {
		t.Fatalf("header %+v", h)
	}
	h, err = rawParse(frame(0x2d00, flagNoAuthCred, 8001, "", "", body))
	if err != nil {
		t.Fatal(err)
	}
	if h.AuthPlugin != 0 || h.AuthCred != "" || !bytes.Equal(h.Body, body) {
		t.Fatalf("no-auth header %+v", h)
	}
}

func TestRawParse_Rejects(t *testing.T) {
	good := frame(0x2a00, 0, 1008, "", "MUNGE:abc:", nil)
	bad := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"short":           good[:3],
		"length prefix":   bad(func(b []byte) []byte { b[3]++; return b }),
		"version":         bad(func(b []byte) []byte { b[5] = 1; return b }),
		"body too long":   bad(func(b []byte) []byte { b[13] = 0xff; return b }),
		"no auth block":   bad(func(b []byte) []byte { b[len(b)-1] = 'x'; return b }),
		"truncated frame": append(binary.BigEndian.AppendUint32(nil, uint32(len(good)-8)), good[4:len(good)-4]...),
		"io_init is not a frame": append(binary.BigEndian.AppendUint32(nil, 23),
			0x2a, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5, 'a', 'b', 'c', 'd', 0),
	}
	for name, b := range cases {
		if _, err := rawParse(b); !errors.Is(err, errNotFrame) {
			t.Errorf("%s: err %v, want errNotFrame", name, err)
		}
	}
}

func TestParseIOInit(t *testing.T) {
	b := append(binary.BigEndian.AppendUint32(nil, 23), 0x2a, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 5, 'a', 'b', 'c', 'd', 0)
	m, ok := parseIOInit(append(b, 0, 1, 2)) // io_hdr packets follow on the stream
	if !ok || m.Version != 0x2a00 || m.NodeID != 1 || m.StdoutObjs != 1 || m.StderrObj != 1 || m.Key != "abcd" {
		t.Fatalf("parseIOInit %+v %v", m, ok)
	}
	if _, ok := parseIOInit(readFrame(t, "req_ping_v2600.bin")); ok {
		t.Fatal("a REQUEST_PING frame read as an io_init_msg")
	}
}

func hexs(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\x%02x", c)
	}
	return s.String()
}

// TestExtract_Trace: a -yy trace in which a frame is written with writev
// (length and rest in two iovecs), read back in pieces with read, mixed with
// a file read, a MSG_PEEK and a second connection on the same fd number, and
// an old-style (no -yy) sendto. Each frame comes out once, under its name.
func TestExtract_Trace(t *testing.T) {
	ping := readFrame(t, "req_ping_v2600.bin")
	rc := frame(0x2a00, flagNoAuthCred, 8001, "", "", []byte{0, 0, 0, 0})
	reg := frame(0x2d00, 0, 1011, "", "MUNGE:xyz:", nil) // REQUEST_HEALTH_CHECK
	sock1 := "TCP:[127.0.0.1:40000->127.0.0.1:6818]"
	sock2 := "TCP:[127.0.0.1:40001->127.0.0.1:6818]"
	lines := []string{
		fmt.Sprintf(`connect(5<%s>, {sa_family=AF_INET, sin_port=htons(6818), sin_addr=inet_addr("127.0.0.1")}, 16) = 0`, sock1),
		fmt.Sprintf(`writev(5<%s>, [{iov_base="%s", iov_len=4}, {iov_base="%s", iov_len=%d}], 2) = %d`,
			sock1, hexs(reg[:4]), hexs(reg[4:]), len(reg)-4, len(reg)),
		fmt.Sprintf(`read(3</etc/slurm/slurm.conf>, "%s", 4096) = %d`, hexs(ping), len(ping)),
		fmt.Sprintf(`recvfrom(5<%s>, "%s", 4, MSG_PEEK, NULL, NULL) = 4`, sock1, hexs(rc[:4])),
		fmt.Sprintf(`read(5<%s>, "%s", 4) = 4`, sock1, hexs(rc[:4])),
		fmt.Sprintf(`read(5<%s>, "%s", %d) = %d`, sock1, hexs(rc[4:10]), len(rc)-4, 6),
		fmt.Sprintf(`read(5<%s>, "%s", %d) = %d`, sock1, hexs(rc[10:]), len(rc)-10, len(rc)-10),
		fmt.Sprintf(`close(5<%s>) = 0`, sock1),
		fmt.Sprintf(`accept4(4<TCP:[0.0.0.0:6818]>, NULL, NULL, SOCK_CLOEXEC) = 5<%s>`, sock2),
		fmt.Sprintf(`read(5<%s>, "%s", 8192) = %d`, sock2, hexs(ping), len(ping)),
		fmt.Sprintf(`sendto(7, "%s", %d, MSG_NOSIGNAL, NULL, 0) = %d`, hexs(rc), len(rc), len(rc)),
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace-n1.123")
	if err := os.WriteFile(trace, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := extract(out, []string{trace}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		"n1-send-REQUEST_HEALTH_CHECK-v2d00-1.bin": reg,
		"n1-recv-RESPONSE_SLURM_RC-v2a00-1.bin":    rc, // the sendto copy is the same frame
		"n1-recv-REQUEST_PING-v2600-1.bin":         ping,
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("files %v, want %d", names, len(want))
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: %x, want %x", name, got, b)
		}
	}
}

func TestByThread(t *testing.T) {
	got := byThread([]string{"d/trace-n1.423", "d/trace-ctld.1219", "d/trace-ctld.423", "d/trace-ctld", "d/trace-ctld.99"})
	want := []string{"d/trace-ctld", "d/trace-ctld.99", "d/trace-ctld.423", "d/trace-ctld.1219", "d/trace-n1.423"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("byThread = %v, want %v", got, want)
	}
}
