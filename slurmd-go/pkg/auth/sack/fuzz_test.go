package sack

import (
	"testing"
)

// FuzzParseRequest: any bytes as a request are parsed or refused with
// ErrMalformed, never a panic, and a parsed CREATE/VERIFY packs back to
// the same request.
func FuzzParseRequest(f *testing.F) {
	f.Add(CreateRequest(0x2A00, 0xffffffff, []byte{2, 1, 2, 3}))
	f.Add(VerifyRequest(0x2D00, "eyJ.eyJ.sig"))
	f.Add([]byte{0x2a, 0, 0, 0, 0, 8, 0, 0, 0xfa, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil || len(b) < HeaderLen+h.BodyLen() {
			return
		}
		body := b[HeaderLen : HeaderLen+h.BodyLen()]
		switch h.RPC {
		case RPCCreate:
			ruid, data, err := ParseCreate(body)
			if err == nil && len(body) == 8+len(data) {
				if got := CreateRequest(h.Version, ruid, data); string(got) != string(b[:HeaderLen+h.BodyLen()]) {
					t.Fatalf("CREATE %x packs back as %x", b, got)
				}
			}
		case RPCVerify:
			tok, err := ParseVerify(body)
			if err == nil && len(body) == 5+len(tok) {
				if got := VerifyRequest(h.Version, tok); string(got) != string(b[:HeaderLen+h.BodyLen()]) {
					t.Fatalf("VERIFY %x packs back as %x", b, got)
				}
			}
		}
	})
}
