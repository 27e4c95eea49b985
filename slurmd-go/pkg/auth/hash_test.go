package auth

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"

	"github.com/cloudflare/circl/xof/k12"
)

const (
	v2205 uint16 = 0x2600
	v2108 uint16 = 0x2500
	v2011 uint16 = 0x2400
)

func k12Payload(t *testing.T, kindByte byte, msgType uint16, body []byte) []byte {
	t.Helper()
	out := make([]byte, 1+K12Size)
	out[0] = kindByte
	k12.Draft10Sum(out[1:], body, binary.BigEndian.AppendUint16(nil, msgType))
	return out
}

func TestPayload(t *testing.T) {
	body := []byte("some packed body")
	tests := []struct {
		name    string
		version uint16
		typ     uint16
		body    []byte
		kind    HashKind
		want    []byte
	}{
		{"22.05 none is big-endian", v2205, 1008, nil, HashNone, []byte{0x01, 0x03, 0xf0}},
		{"21.08 header is little-endian none whatever the kind", v2108, 1001, body, HashK12, []byte{0x01, 0xe9, 0x03}},
		{"20.11 header is little-endian none", v2011, 1016, nil, HashDefault, []byte{0x01, 0xf8, 0x03}},
		{"22.05 k12", v2205, 5024, body, HashK12, k12Payload(t, 2, 5024, body)},
		{"22.05 default means k12", v2205, 5024, body, HashDefault, k12Payload(t, 2, 5024, body)},
		{"22.05 unknown kind means k12", v2205, 5024, body, HashKind(7), k12Payload(t, 2, 5024, body)},
		{"22.05 k12 of empty body", v2205, 1008, nil, HashK12, k12Payload(t, 2, 1008, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Payload(tc.version, tc.typ, tc.body, tc.kind)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("Payload = %x, want %x", got, tc.want)
			}
		})
	}
}

// The customization string must be the msg type: same body, other type,
// other digest.
func TestPayload_TypeIsCustomization(t *testing.T) {
	body := []byte{1, 2, 3}
	a, b := Payload(v2205, 1, body, HashK12), Payload(v2205, 2, body, HashK12)
	if bytes.Equal(a, b) {
		t.Fatalf("k12 payload does not depend on msg_type: %x", a)
	}
}

func TestAppendPayload_NoAlloc(t *testing.T) {
	body := make([]byte, 300)
	buf := make([]byte, 0, 1+K12Size)
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendPayload(buf[:0], v2205, 1002, body, HashK12)
	})
	// The daemon hashes every RPC it sends and receives.
	if allocs != 0 {
		t.Fatalf("AppendPayload allocates %.0f times per call", allocs)
	}
}

func TestCheckPayload(t *testing.T) {
	body := []byte("the exact received body bytes")
	good := k12Payload(t, 2, 6001, body)
	flipped := bytes.Clone(good)
	flipped[5] ^= 0x80
	zeroKind := k12Payload(t, 0, 6001, body)
	tests := []struct {
		name    string
		version uint16
		typ     uint16
		body    []byte
		payload []byte
		policy  HashPolicy
		want    HashKind
		wantErr error
	}{
		{"empty accepted by default", v2205, 6001, body, nil, HashPolicy{}, HashDefault, nil},
		{"empty refused by block_null_hash", v2205, 6001, body, nil, HashPolicy{BlockNullHash: true}, 0, ErrHashMissing},
		{"k12 ok", v2205, 6001, body, good, HashPolicy{}, HashK12, nil},
		{"k12 ok under both blocks", v2205, 6001, body, good, HashPolicy{true, true}, HashK12, nil},
		{"k12 accepted on a 20.11 header too", v2011, 6001, body, good, HashPolicy{}, HashK12, nil},
		{"kind 0 is Slurm's default plugin, i.e. k12", v2205, 6001, body, zeroKind, HashPolicy{}, HashK12, nil},
		{"k12 digest flipped", v2205, 6001, body, flipped, HashPolicy{}, 0, ErrHashMismatch},
		{"k12 over other body", v2205, 6001, []byte("tampered body bytes........."), good, HashPolicy{}, 0, ErrHashMismatch},
		{"k12 body one byte short", v2205, 6001, body[:len(body)-1], good, HashPolicy{}, 0, ErrHashMismatch},
		{"k12 other msg type", v2205, 6002, body, good, HashPolicy{}, 0, ErrHashMismatch},
		{"k12 truncated", v2205, 6001, body, good[:32], HashPolicy{}, 0, ErrHashMismatch},
		{"k12 extra byte", v2205, 6001, body, append(bytes.Clone(good), 0), HashPolicy{}, 0, ErrHashMismatch},
		{"none big-endian", v2205, 1008, nil, []byte{1, 0x03, 0xf0}, HashPolicy{}, HashNone, nil},
		{"none big-endian on 20.11 header", v2011, 1008, nil, []byte{1, 0x03, 0xf0}, HashPolicy{}, HashNone, nil},
		{"none little-endian on 20.11 header", v2011, 1001, nil, []byte{1, 0xe9, 0x03}, HashPolicy{}, HashNone, nil},
		{"none little-endian on 21.08 header", v2108, 1001, nil, []byte{1, 0xe9, 0x03}, HashPolicy{}, HashNone, nil},
		{"none little-endian refused on 22.05 header", v2205, 1001, nil, []byte{1, 0xe9, 0x03}, HashPolicy{}, 0, ErrHashMismatch},
		{"none wrong type", v2205, 1008, nil, []byte{1, 0x03, 0xf1}, HashPolicy{}, 0, ErrHashMismatch},
		{"none too long", v2205, 1008, nil, []byte{1, 0x03, 0xf0, 0}, HashPolicy{}, 0, ErrHashMismatch},
		{"none too short", v2205, 1008, nil, []byte{1, 0x03}, HashPolicy{}, 0, ErrHashMismatch},
		{"none refused by block_zero_hash", v2205, 1008, nil, []byte{1, 0x03, 0xf0}, HashPolicy{BlockZeroHash: true}, 0, ErrHashMismatch},
		{"unknown hash type", v2205, 1008, nil, append([]byte{3}, good[1:]...), HashPolicy{}, 0, ErrHashMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckPayload(tc.version, tc.typ, tc.body, tc.payload, tc.policy)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("CheckPayload error = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("CheckPayload kind = %v, want %v", got, tc.want)
			}
			if err != nil && RC(err) != RCIncompletePacket {
				t.Fatalf("RC(%v) = %d, want %d", err, RC(err), RCIncompletePacket)
			}
		})
	}
}

// A reply mirrors the kind CheckPayload saw (Slurm copies hash_index).
func TestCheckPayload_ReplyMirrors(t *testing.T) {
	for _, kind := range []HashKind{HashNone, HashK12, HashDefault} {
		reqBody := []byte{0, 0, 0, 1}
		req := Payload(v2205, 5024, reqBody, kind)
		if kind == HashDefault {
			req = nil // the "no payload" request
		}
		seen, err := CheckPayload(v2205, 5024, reqBody, req, HashPolicy{})
		if err != nil {
			t.Fatalf("%v: %v", kind, err)
		}
		reply := Payload(v2205, 5025, []byte("reply"), seen)
		wantFirst := byte(HashK12)
		if kind == HashNone {
			wantFirst = byte(HashNone)
		}
		if reply[0] != wantFirst {
			t.Fatalf("request %v: reply payload kind %d, want %d", kind, reply[0], wantFirst)
		}
	}
}

func TestHashKind_String(t *testing.T) {
	for k, want := range map[HashKind]string{0: "default", 1: "none", 2: "k12", 9: "HashKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("HashKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// KangarooTwelve draft-10 test vector (empty message, empty customization,
// 32 bytes), to pin the circl function the payload relies on.
func TestK12_DraftVector(t *testing.T) {
	want, _ := hex.DecodeString("1ac2d450fc3b4205d19da7bfca1b37513c0803577ac7167f06fe2ce1f0ef39e5")
	got := make([]byte, 32)
	k12.Draft10Sum(got, nil, nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("K12(\"\") = %x, want %x", got, want)
	}
}

func FuzzCheckPayload(f *testing.F) {
	f.Add(uint16(0x2600), uint16(1008), []byte{}, []byte{1, 3, 0xf0})
	f.Add(uint16(0x2400), uint16(1001), []byte{1, 2}, []byte{1, 0xe9, 3})
	f.Add(uint16(0x2600), uint16(5024), []byte("body"), []byte{2})
	f.Fuzz(func(t *testing.T, version, typ uint16, body, payload []byte) {
		// Never panics; whatever it accepts, Payload of that kind is accepted too.
		kind, err := CheckPayload(version, typ, body, payload, HashPolicy{})
		if err != nil {
			return
		}
		own := Payload(version, typ, body, kind)
		if _, err := CheckPayload(version, typ, body, own, HashPolicy{}); err != nil {
			t.Fatalf("own payload %x refused: %v", own, err)
		}
	})
}

func BenchmarkPayloadK12(b *testing.B) {
	for _, n := range []int{0, 256, 4096, 65536} {
		body := make([]byte, n)
		b.Run(byteSize(n), func(b *testing.B) {
			buf := make([]byte, 0, 1+K12Size)
			b.SetBytes(int64(n))
			for b.Loop() {
				buf = AppendPayload(buf[:0], v2205, 6001, body, HashK12)
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1024 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
