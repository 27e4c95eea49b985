package slurmproto

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// go test -run TestFuzzCorpus -update-corpus rewrites testdata/fuzz/*/seed-*
// from the golden frames and sampleBodies.
var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed fuzz seed corpus")

// goldenFrames are every captured frame, 22.05's (testdata/*.bin) and the
// other releases' (named after their directory: "r2411-munge-<file>").
func goldenFrames(t testing.TB) map[string][]byte {
	files, err := filepath.Glob("testdata/*.bin")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	add := func(name, f string) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b[4:]
	}
	for _, f := range files {
		add(strings.TrimSuffix(filepath.Base(f), ".bin"), f)
	}
	for _, d := range releaseGoldenDirs {
		fs, err := filepath.Glob(filepath.Join("testdata", d, "*.bin"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			base := filepath.Base(f)
			if strings.HasPrefix(base, "io_init_") || strings.HasSuffix(base, "_cred_payload.bin") {
				continue
			}
			add(strings.ReplaceAll(d, "/", "-")+"-"+strings.TrimSuffix(base, ".bin"), f)
		}
	}
	return out
}

type bodySeed struct {
	version uint16
	typ     uint16
	body    []byte
}

func bodySeeds(t testing.TB) map[string]bodySeed {
	out := map[string]bodySeed{}
	for name, fr := range goldenFrames(t) {
		m, err := DecodeMessage(fr)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = bodySeed{m.Header.Version, uint16(m.Header.MsgType), m.Body}
		for i, e := range m.Header.RetList {
			out[fmt.Sprintf("%s-ret%d", name, i)] = bodySeed{m.Header.Version, uint16(e.MsgType), e.Body}
		}
	}
	for i, b := range sampleBodies() {
		for _, v := range []uint16{Version2011, Version2205, Version2411, Version2605} {
			enc, err := EncodeBody(v, forRelease(b, v))
			if err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("sample%02d-%04x", i, v)] = bodySeed{v, uint16(b.MsgType()), enc}
		}
	}
	return out
}

// TestFuzzCorpus keeps the committed seed corpus in sync (with
// -update-corpus) and otherwise checks it exists.
func TestFuzzCorpus(t *testing.T) {
	write := func(fuzz, name string, vals ...string) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		path := filepath.Join(dir, "seed-"+name)
		if !*updateCorpus {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("missing seed %s (run with -update-corpus)", path)
			}
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		content := "go test fuzz v1\n" + strings.Join(vals, "\n") + "\n"
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, fr := range goldenFrames(t) {
		write("FuzzDecodeMessage", name, "[]byte("+strconv.Quote(string(fr))+")")
		u := NewUnpacker(fr)
		if _, err := DecodeHeader(u); err != nil {
			t.Fatal(err)
		}
		write("FuzzDecodeHeader", name, "[]byte("+strconv.Quote(string(fr[:u.Offset()]))+")")
	}
	for name, s := range bodySeeds(t) {
		write("FuzzDecodeBody", name, fmt.Sprintf("uint16(%d)", s.version), fmt.Sprintf("uint16(%d)", s.typ),
			"[]byte("+strconv.Quote(string(s.body))+")")
	}
}

// FuzzDecodeMessage: decoding never panics; a decoded message re-encodes to
// a frame that decodes again and re-encodes to the same bytes (the first
// encode normalizes the few non-canonical forms, e.g. RESPONSE_SLURM_RC_MSG
// ret_list entries).
func FuzzDecodeMessage(f *testing.F) {
	for _, fr := range goldenFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := DecodeMessage(frame)
		if err != nil {
			return
		}
		enc1 := EncodeMessage(m.Header, m.Auth, m.Body)
		m2, err := DecodeMessage(enc1[4:])
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if enc2 := EncodeMessage(m2.Header, m2.Auth, m2.Body); !bytes.Equal(enc1, enc2) {
			t.Fatalf("encode not stable:\n%x\n%x", enc1, enc2)
		}
		if b, err := DecodeBody(m.Header.Version, m.Header.MsgType, m.Body); err == nil {
			if _, err := EncodeBody(m.Header.Version, b); err != nil {
				t.Fatalf("decoded body does not encode: %v", err)
			}
		}
	})
}

// FuzzDecodeHeader: as FuzzDecodeMessage, for the header alone.
func FuzzDecodeHeader(f *testing.F) {
	for _, fr := range goldenFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u := NewUnpacker(b)
		h, err := DecodeHeader(u)
		if err != nil {
			return
		}
		enc1 := EncodeHeader(h)
		h2, err := DecodeHeader(NewUnpacker(enc1))
		if err != nil {
			t.Fatalf("re-encoded header does not decode: %v", err)
		}
		if enc2 := EncodeHeader(h2); !bytes.Equal(enc1, enc2) {
			t.Fatalf("encode not stable:\n%x\n%x", enc1, enc2)
		}
	})
}

// FuzzDecodeBody fuzzes every registered body codec (version and type are
// fuzzed too). Decoded bodies must re-encode, and re-encoding is stable.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range bodySeeds(f) {
		f.Add(s.version, s.typ, s.body)
	}
	f.Fuzz(func(t *testing.T, version, typ uint16, b []byte) {
		m, n, err := DecodeBodyPrefix(version, MsgType(typ), b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		enc1, err := EncodeBody(version, m)
		if err != nil {
			t.Fatalf("decoded body does not encode: %v", err)
		}
		m2, err := DecodeBody(version, MsgType(typ), enc1)
		if err != nil {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
		enc2, err := EncodeBody(version, m2)
		if err != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("encode not stable: %v\n%x\n%x", err, enc1, enc2)
		}
	})
}
