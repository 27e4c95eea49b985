package slurmproto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// goldenBcast are the REQUEST_FILE_BCAST frames of the real daemons: sbcast
// -f of one small file inside a user (tieegold) batch job, one block; the
// 22.05 one for the job's step 1 (sbcast -j JOB.1), the others for step 0.
var goldenBcast = []struct {
	file    string
	version uint16
	token   bool
	step    uint32
}{
	{"sbcast/file_bcast_v2600.bin", Version2205, false, 1},
	{"r2411/munge/file_bcast_v2a00.bin", Version2411, false, 0},
	{"r2411/slurm/file_bcast_v2a00.bin", Version2411, true, 0},
	{"r2605/munge/file_bcast_v2d00.bin", Version2605, false, 0},
	{"r2605/slurm/file_bcast_v2d00.bin", Version2605, true, 0},
}

// TestFileBcast_Golden: each captured FILE_BCAST decodes at its release to
// the block sbcast sent and the credential slurmctld made: under munge its
// signed bytes are the munge payload (unmunge -o) and re-pack from the
// fields to the same bytes; under auth/slurm the token's claims give the
// fields of the claims file beside the frame.
func TestFileBcast_Golden(t *testing.T) {
	for _, g := range goldenBcast {
		t.Run(g.file, func(t *testing.T) {
			m, body := decodeGolden(t, g.file)
			if m.Header.Version != g.version || m.Header.Flags&FlagUseBcastNetwork == 0 {
				t.Fatalf("header %+v", m.Header)
			}
			fb := body.(*FileBcast)
			c := fb.Cred
			if fb.BlockNo != 1 || fb.Flags != FileBcastForce|FileBcastLastBlock || fb.Compress != CompressOff ||
				fb.BlockOffset != 0 || uint64(len(fb.Block)) != fb.FileSize || fb.UncompLen != uint32(len(fb.Block)) {
				t.Fatalf("block fields %+v", fb)
			}
			if fb.Modes&0o170000 != 0o100000 || !strings.HasSuffix(fb.FName, fmt.Sprintf("/work-user/bcast.%d", c.StepID.JobID)) {
				t.Fatalf("mode %o, fname %q for job %d", fb.Modes, fb.FName, c.StepID.JobID)
			}
			src := "#!/bin/sh\n# Fails while " // the capture's prolog.sh
			if g.version == Version2205 {
				src = "tiee sbcast golden file (22.05.8)\n"
			}
			if !bytes.HasPrefix(fb.Block, []byte(src)) {
				t.Fatalf("block %q", fb.Block)
			}
			if c.UID != 1002 || c.GID != 1002 || c.PwName != "tieegold" || !reflect.DeepEqual(c.Gids, []uint32{1002}) ||
				c.StepID.StepID != g.step || c.HetJobID != 0 || c.CTime.IsZero() || !c.Expiration.After(c.CTime) {
				t.Fatalf("cred %+v", c)
			}
			if (c.StepID.SLUID != 0) != (g.version == Version2605) {
				t.Errorf("sluid %x at %s", c.StepID.SLUID, ReleaseName(g.version))
			}
			if g.token {
				checkBcastClaims(t, filepath.Join("testdata", filepath.Dir(g.file), "file_bcast_cred_claims.json"), c)
				return
			}
			payload := readGolden(t, filepath.Join(filepath.Dir(g.file), "file_bcast_cred_payload.bin"))
			if !bytes.Equal(c.Signed, payload) {
				t.Fatalf("signed bytes\n %x\nare not the munge payload\n %x", c.Signed, payload)
			}
			if fields, err := c.PackFields(g.version); err != nil || !bytes.Equal(fields, payload) {
				t.Fatalf("PackFields: %v\n got %x\nwant %x", err, fields, payload)
			}
			if !bytes.HasPrefix(c.Signature, []byte("MUNGE:")) || !bytes.HasSuffix(c.Signature, []byte(":\x00")) || c.Token != "" {
				t.Fatalf("signature %q token %q", c.Signature, c.Token)
			}
			// Packed from its fields (Signed dropped), the body is the same.
			re := *fb
			rc := *c
			rc.Signed = nil
			re.Cred = &rc
			if enc, err := EncodeBody(g.version, &re); err != nil || !bytes.Equal(enc, m.Body) {
				t.Fatalf("re-packed from fields: %v\n got %x\nwant %x", err, enc, m.Body)
			}
		})
	}
}

// checkBcastClaims holds a token-form credential against the claims file
// credpayload.py wrote from the same token.
func checkBcastClaims(t *testing.T, path string, c *SbcastCred) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(c.Token, ".")
	tokClaims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(tokClaims, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("token claims %v, file %v", got, want)
	}
	if want["context"] != "sbcast" || want["payload"] != nil || c.Signed != nil || c.Signature != nil {
		t.Fatalf("context %v payload %v signed %x", want["context"], want["payload"], c.Signed)
	}
	num := func(v any) uint32 { return uint32(v.(float64)) }
	id := want["id"].(map[string]any)
	sb := want["sbcast"].(map[string]any)
	var gids []uint32
	for _, g := range id["gids"].([]any) {
		gids = append(gids, num(g))
	}
	str := func(v any) string {
		if s := v.(string); s != "" {
			return s
		}
		return EmptyString
	}
	wantCred := &SbcastCred{
		StepID:   StepID{JobID: num(sb["job_id"]), StepID: num(sb["step_id"]), StepHetComp: NoVal},
		HetJobID: num(sb["het_job_id"]),
		Identity: Identity{UID: num(want["uid"]), GID: num(want["gid"]), PwName: str(id["name"]), PwGecos: str(id["gecos"]),
			PwDir: str(id["dir"]), PwShell: str(id["shell"]), Gids: gids},
		CTime:      time.Unix(int64(want["iat"].(float64)), 0),
		Expiration: time.Unix(int64(want["exp"].(float64)), 0),
		Nodes:      sb["nodes"].(string),
		Token:      c.Token,
	}
	if s, ok := sb["sluid"].(string); ok {
		if wantCred.StepID.SLUID, err = ParseSLUID(s); err != nil || FormatSLUID(c.StepID.SLUID) != s {
			t.Fatalf("sluid %q: %v, decoded %s", s, err, FormatSLUID(c.StepID.SLUID))
		}
	}
	if !reflect.DeepEqual(c, wantCred) {
		t.Fatalf("decoded\n %+v\nclaims say\n %+v", c, wantCred)
	}
}

// sampleBcast is a FILE_BCAST with every field of release v set (22.05's
// credential has no gecos, dir, shell or group names, 26.05's has a SLUID).
func sampleBcast(v uint16) *FileBcast {
	c := &SbcastCred{
		StepID:   StepID{JobID: 9, StepID: 2, StepHetComp: NoVal},
		HetJobID: NoVal,
		Identity: Identity{UID: 1000, GID: 100, PwName: "alice", Gids: []uint32{100, 27}},
		CTime:    time.Unix(1700000000, 0), Expiration: time.Unix(1700000120, 0),
		Nodes: "n[1-3]", Signature: []byte("MUNGE:AwQ=:\x00"),
	}
	m := &FileBcast{BlockNo: 2, Compress: CompressLZ4, Flags: FileBcastLastBlock | FileBcastSO, Modes: 0o100755,
		UID: 1000, UserName: "alice", GID: 100, ATime: time.Unix(1699990000, 0), MTime: time.Unix(1699990001, 0),
		FName: "/tmp/app.so", UncompLen: 9, BlockOffset: 8 << 20, FileSize: 8<<20 + 9,
		Block: []byte{0xde, 0xad, 0xbe, 0xef, 5}, Cred: c}
	if v >= Version2411 {
		m.ExeFName = "/tmp/app"
		c.PwGecos, c.PwDir, c.PwShell, c.GrNames = EmptyString, "/home/alice", "/bin/sh", []string{"users", "sudo"}
	}
	if v >= Version2605 {
		c.StepID.SLUID = 0x2ab688c1ce287400
		c.StepID.StepHetComp = 1
	}
	return m
}

// TestFileBcast_RoundTrip: a message with every field of the release set
// encodes, decodes to the same values, and its credential's signed bytes
// are exactly its packed fields.
func TestFileBcast_RoundTrip(t *testing.T) {
	for _, v := range Spoken() {
		t.Run(ReleaseName(v), func(t *testing.T) {
			want := sampleBcast(v)
			enc, err := EncodeBody(v, want)
			if err != nil {
				t.Fatal(err)
			}
			b, err := DecodeBody(v, RequestFileBcast, enc)
			if err != nil {
				t.Fatal(err)
			}
			got := b.(*FileBcast)
			fields, err := want.Cred.PackFields(v)
			if err != nil || !bytes.Equal(got.Cred.Signed, fields) {
				t.Fatalf("signed %x, fields %x (%v)", got.Cred.Signed, fields, err)
			}
			want.Cred.Signed = fields
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got\n %+v %+v\nwant\n %+v %+v", got, got.Cred, want, want.Cred)
			}
			if re, err := EncodeBody(v, got); err != nil || !bytes.Equal(re, enc) {
				t.Fatalf("re-encode: %v", err)
			}
		})
	}
}

// TestFileBcast_FieldsNotOnTheWire: what a release does not pack is not
// sent, and reads back as its default.
func TestFileBcast_FieldsNotOnTheWire(t *testing.T) {
	m := sampleBcast(Version2605)
	for _, tc := range []struct {
		v    uint16
		want func(*FileBcast)
	}{
		{Version2205, func(w *FileBcast) {
			w.ExeFName = ""
			w.Cred.PwGecos, w.Cred.PwDir, w.Cred.PwShell, w.Cred.GrNames = "", "", "", nil
			w.Cred.StepID.SLUID, w.Cred.StepID.StepHetComp = 0, NoVal
		}},
		{Version2411, func(w *FileBcast) { w.Cred.StepID.SLUID, w.Cred.StepID.StepHetComp = 0, NoVal }},
	} {
		enc, err := EncodeBody(tc.v, m)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeBody(tc.v, RequestFileBcast, enc)
		if err != nil {
			t.Fatal(err)
		}
		got := b.(*FileBcast)
		want := *m
		wc := *m.Cred
		want.Cred = &wc
		tc.want(&want)
		wc.Signed = got.Cred.Signed
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("%s: got %+v\nwant %+v", ReleaseName(tc.v), got.Cred, want.Cred)
		}
	}
}

// bcastToken is an (unsigned) JWT with the given claims, as the codec sees
// it: nothing here verifies the signature.
func bcastToken(claims string) string {
	e := base64.RawURLEncoding
	return e.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + e.EncodeToString([]byte(claims)) + ".c2ln"
}

// withToken is a FILE_BCAST of release v whose credential is tok.
func withToken(t *testing.T, v uint16, tok string) []byte {
	t.Helper()
	m := sampleBcast(v)
	m.Cred = &SbcastCred{Token: tok}
	enc, err := EncodeBody(v, m)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestFileBcast_Token: a cred/slurm credential is the token alone; its
// grants fill the fields (group names in the order of the "groups" object,
// the SLUID from 26.05 only), and the body re-encodes to the same bytes.
func TestFileBcast_Token(t *testing.T) {
	tok := bcastToken(`{"context":"sbcast","exp":1700000060,"iat":1700000000,"uid":1000,"gid":100,` +
		`"id":{"name":"alice","gecos":"","dir":"/home/alice","shell":"/bin/sh","groups":{"users":100,"adm":4}},` +
		`"sbcast":{"nodes":"n[1-2]","job_id":9,"het_job_id":4294967294,"step_id":2,"sluid":"s1AQ38C3KE1T00"}}`)
	sluid, err := ParseSLUID("s1AQ38C3KE1T00")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint16{Version2411, Version2605} {
		enc := withToken(t, v, tok)
		b, err := DecodeBody(v, RequestFileBcast, enc)
		if err != nil {
			t.Fatalf("%s: %v", ReleaseName(v), err)
		}
		got := b.(*FileBcast).Cred
		want := &SbcastCred{StepID: StepID{JobID: 9, StepID: 2, StepHetComp: NoVal}, HetJobID: NoVal,
			Identity: Identity{UID: 1000, GID: 100, PwName: "alice", PwGecos: EmptyString, PwDir: "/home/alice", PwShell: "/bin/sh",
				Gids: []uint32{100, 4}, GrNames: []string{"users", "adm"}},
			CTime: time.Unix(1700000000, 0), Expiration: time.Unix(1700000060, 0), Nodes: "n[1-2]", Token: tok}
		if v >= Version2605 {
			want.StepID.SLUID = sluid
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got\n %+v\nwant\n %+v", ReleaseName(v), got, want)
		}
		if re, err := EncodeBody(v, b); err != nil || !bytes.Equal(re, enc) {
			t.Errorf("%s: re-encode: %v", ReleaseName(v), err)
		}
	}
	// Without an "id" grant the identity is the uid and gid alone.
	bare := bcastToken(`{"context":"sbcast","uid":1000,"gid":100,"sbcast":{"job_id":9}}`)
	b, err := DecodeBody(Version2411, RequestFileBcast, withToken(t, Version2411, bare))
	if err != nil {
		t.Fatal(err)
	}
	if c := b.(*FileBcast).Cred; !reflect.DeepEqual(c.Identity, Identity{UID: 1000, GID: 100}) || c.Nodes != "" || !c.CTime.IsZero() {
		t.Fatalf("bare token: %+v", c)
	}
}

// TestFileBcast_BadInput: malformed bodies and credentials are errors
// wrapping the package's sentinels, never a panic.
func TestFileBcast_BadInput(t *testing.T) {
	// patch returns a valid body of release v changed by f.
	patch := func(v uint16, f func(b []byte) []byte) []byte {
		enc, err := EncodeBody(v, sampleBcast(v))
		if err != nil {
			t.Fatal(err)
		}
		return f(enc)
	}
	// The block (de ad be ef 05) follows u32 block_len, uncomp_len, u64
	// block_offset, file_size and its own u32 length.
	blockLenAt := func(b []byte) int { return bytes.Index(b, []byte{0xde, 0xad, 0xbe, 0xef, 5}) - 28 }
	sigLen := 4 + len(sampleBcast(Version2205).Cred.Signature)
	withSig := func(sig []byte) func([]byte) []byte {
		return func(b []byte) []byte {
			p := NewPacker(0)
			p.Raw(b[:len(b)-sigLen])
			p.Mem(sig)
			return p.Bytes()
		}
	}
	// A 24.11 credential whose identity has one group name for two gids.
	badGroups := func(b []byte) []byte {
		c := sampleBcast(Version2411).Cred
		fields, _ := c.PackFields(Version2411)
		start := len(b) - sigLen - len(fields)
		p := NewPacker(0)
		p.Raw(b[:start])
		p.U32(c.UID)
		p.U32(c.GID)
		for _, s := range []string{c.PwName, c.PwGecos, c.PwDir, c.PwShell} {
			p.Str(s)
		}
		p.U32Array([]uint32{1, 2})
		p.StrArray([]string{"one"})
		return p.Bytes()
	}
	tokenBody := func(claims string) func([]byte) []byte {
		return func([]byte) []byte { return withToken(t, Version2605, bcastToken(claims)) }
	}
	for _, tc := range []struct {
		name string
		v    uint16
		body []byte
		want error
	}{
		{"block_len not the block's", Version2411, patch(Version2411, func(b []byte) []byte {
			b[blockLenAt(b)+3]++
			return b
		}), ErrMalformed},
		{"no signature 22.05", Version2205, patch(Version2205, withSig(nil)), ErrMalformed},
		{"no signature 26.05", Version2605, patch(Version2605, withSig(nil)), ErrMalformed},
		{"signature no string 24.11", Version2411, patch(Version2411, withSig([]byte("MUNGE:x:"))), ErrMalformed},
		{"identity gr_names", Version2411, patch(Version2411, badGroups), ErrMalformed},
		{"trailing byte", Version2605, patch(Version2605, func(b []byte) []byte { return append(b, 0) }), ErrMalformed},
		{"launch token", Version2605, patch(Version2605, tokenBody(`{"context":"launch","payload":"AAAA"}`)), ErrMalformed},
		{"token without grant", Version2605, patch(Version2605, tokenBody(`{"context":"sbcast","uid":1}`)), ErrMalformed},
		{"token uid", Version2605, patch(Version2605, tokenBody(`{"context":"sbcast","uid":-1,"sbcast":{}}`)), ErrMalformed},
		{"token job_id", Version2605, patch(Version2605, tokenBody(`{"context":"sbcast","sbcast":{"job_id":"x"}}`)), ErrMalformed},
		{"token groups", Version2605, patch(Version2605, tokenBody(`{"context":"sbcast","id":{"groups":[1]},"sbcast":{}}`)), ErrMalformed},
		{"token sluid", Version2605, patch(Version2605, tokenBody(`{"context":"sbcast","sbcast":{"sluid":"sZZZZZZZZZZZZZ"}}`)), ErrMalformed},
		{"token claims not json", Version2605, patch(Version2605, tokenBody(`{"context":`)), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeBody(tc.v, RequestFileBcast, tc.body); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// 22.05 packs the signature with packmem: no NUL needed there. A 24.11
	// sluid grant is not read (24.11's extract_sbcast has none).
	if _, err := DecodeBody(Version2205, RequestFileBcast, patch(Version2205, withSig([]byte("MUNGE:x:")))); err != nil {
		t.Errorf("22.05 signature without NUL: %v", err)
	}
	if _, err := DecodeBody(Version2411, RequestFileBcast,
		withToken(t, Version2411, bcastToken(`{"context":"sbcast","sbcast":{"sluid":"sZZZZZZZZZZZZZ"}}`))); err != nil {
		t.Errorf("24.11 token with a sluid: %v", err)
	}
	// Every truncation of a valid body fails cleanly.
	for _, v := range Spoken() {
		enc, _ := EncodeBody(v, sampleBcast(v))
		for n := 0; n < len(enc); n++ {
			if _, err := DecodeBody(v, RequestFileBcast, enc[:n]); !errors.Is(err, ErrShortBuffer) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: %d of %d bytes: %v", ReleaseName(v), n, len(enc), err)
			}
		}
	}
}

// TestFileBcast_EncodeErrors: what Slurm could not pack is refused.
func TestFileBcast_EncodeErrors(t *testing.T) {
	mod := func(v uint16, f func(*FileBcast)) *FileBcast {
		m := sampleBcast(v)
		f(m)
		return m
	}
	for _, tc := range []struct {
		name string
		v    uint16
		m    *FileBcast
		want error
	}{
		{"no cred", Version2411, mod(Version2411, func(m *FileBcast) { m.Cred = nil }), ErrMalformed},
		{"no signature", Version2205, mod(Version2205, func(m *FileBcast) { m.Cred.Signature = nil }), ErrMalformed},
		{"signature no string", Version2605, mod(Version2605, func(m *FileBcast) { m.Cred.Signature = []byte("x") }), ErrMalformed},
		{"gr_names", Version2411, mod(Version2411, func(m *FileBcast) { m.Cred.GrNames = []string{"a"} }), ErrMalformed},
		{"token at 22.05", Version2205, mod(Version2205, func(m *FileBcast) { m.Cred.Token = bcastToken(`{}`) }), ErrNoLayout},
		{"20.11", Version2011, sampleBcast(Version2205), ErrNoLayout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := EncodeBody(tc.v, tc.m); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := (&SbcastCred{}).PackFields(Version2302); !errors.Is(err, ErrNoLayout) {
		t.Fatalf("PackFields at 23.02: %v", err)
	}
}

// TestFileBcast_NoLayout: FILE_BCAST has a layout in the spoken releases
// only; at any other header version it is ErrNoLayout both ways.
func TestFileBcast_NoLayout(t *testing.T) {
	if got := Layouts()[RequestFileBcast]; !reflect.DeepEqual(got, spoken) {
		t.Fatalf("layouts %04x", got)
	}
	m, _ := decodeGolden(t, "sbcast/file_bcast_v2600.bin")
	for _, v := range headerVersions {
		if Speaks(v) {
			continue
		}
		if _, err := DecodeBody(v, RequestFileBcast, m.Body); !errors.Is(err, ErrNoLayout) || !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("decode at 0x%04x: %v", v, err)
		}
		if _, err := EncodeBody(v, sampleBcast(Version2205)); !errors.Is(err, ErrNoLayout) {
			t.Errorf("encode at 0x%04x: %v", v, err)
		}
	}
}
