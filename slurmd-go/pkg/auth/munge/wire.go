package munge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// munged's socket protocol, version 4 (munge 0.5.x, m_msg.c): every transaction is one
// connection carrying one request and one response. A message is an 11-byte header (magic,
// version, type, retry, body length) and a body; integers are big-endian; strings and data
// are a length and the bytes. munged learns the client's uid and gid from the socket
// (SO_PEERCRED), so nothing else is sent.
const (
	msgMagic   = 0x00606D4B
	msgVersion = 4
	msgHdrSize = 11

	msgEncReq = 2
	msgEncRsp = 3
	msgDecReq = 4
	msgDecRsp = 5

	// maxRequest is munged's limit on a request body (MUNGE_MAXIMUM_REQ_LEN).
	maxRequest = 1 << 20
	// maxResponse bounds what is read back: a credential or payload of a request munged
	// accepted, plus the fixed fields, with room to spare.
	maxResponse = 4 * maxRequest

	// munge.h defaults: the daemon's cipher, MAC and compression.
	cipherDefault = 1
	macDefault    = 1
	zipDefault    = 1
	uidAny        = math.MaxUint32 // MUNGE_UID_ANY, MUNGE_GID_ANY
)

var errShort = errors.New("truncated message")

// header packs a message header for a body of n bytes.
func header(typ, retry uint8, n int) []byte {
	h := make([]byte, msgHdrSize, msgHdrSize+n)
	binary.BigEndian.PutUint32(h[0:], msgMagic)
	h[4] = msgVersion
	h[5] = typ
	h[6] = retry
	binary.BigEndian.PutUint32(h[7:], uint32(n))
	return h
}

// parseHeader checks a received header against the expected type and returns the body
// length.
func parseHeader(h []byte, want uint8) (int, error) {
	if magic := binary.BigEndian.Uint32(h[0:]); magic != msgMagic {
		return 0, fmt.Errorf("Received invalid message magic %d", magic)
	}
	if h[4] != msgVersion {
		return 0, fmt.Errorf("Received invalid message version %d", h[4])
	}
	if h[5] != want {
		return 0, fmt.Errorf("Received unexpected message type %d", h[5])
	}
	n := binary.BigEndian.Uint32(h[7:])
	if n > maxResponse {
		return 0, fmt.Errorf("Received message length %d exceeding max of %d", n, maxResponse)
	}
	return int(n), nil
}

// encodeRequest is a complete MUNGE_MSG_ENC_REQ: default cipher, MAC and compression, no
// realm, ttl (0: munged's default, -1: its maximum), the uid allowed to decode (uidAny: any)
// and the payload.
func encodeRequest(retry uint8, payload []byte, ttl int, authUID uint32) []byte {
	n := 3 + 1 + 4 + 4 + 4 + 4 + len(payload)
	b := header(msgEncReq, retry, n)
	b = append(b, cipherDefault, macDefault, zipDefault, 0) // realm_len 0
	b = binary.BigEndian.AppendUint32(b, uint32(int32(ttl)))
	b = binary.BigEndian.AppendUint32(b, authUID)
	b = binary.BigEndian.AppendUint32(b, uidAny) // auth_gid
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// decodeRequest is a complete MUNGE_MSG_DEC_REQ: the credential with its NUL, as libmunge
// sends it.
func decodeRequest(retry uint8, cred string) []byte {
	n := 4 + len(cred) + 1
	b := header(msgDecReq, retry, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cred)+1))
	b = append(b, cred...)
	return append(b, 0)
}

// reader walks a response body.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// cstring reads a length-prefixed string whose length counts its NUL.
func (r *reader) cstring(n int) string {
	v := r.take(n)
	for len(v) > 0 && v[len(v)-1] == 0 {
		v = v[:len(v)-1]
	}
	return string(v)
}

// encodeResponse unpacks MUNGE_MSG_ENC_RSP: munged's error code and message, and the
// credential.
func encodeResponse(body []byte) (result, error) {
	r := &reader{b: body}
	out := result{code: int(r.u8())}
	out.msg = r.cstring(int(r.u8()))
	out.cred = r.cstring(int(r.u32()))
	if r.err != nil {
		return result{}, r.err
	}
	if out.code == eSuccess && out.cred == "" {
		return result{}, errors.New("Client received invalid data length 0")
	}
	return out, nil
}

// decodeResponse unpacks MUNGE_MSG_DEC_RSP. munged fills every field; the payload is there
// on success and also for expired, rewound and replayed credentials.
func decodeResponse(body []byte) (result, error) {
	r := &reader{b: body}
	out := result{code: int(r.u8())}
	out.msg = r.cstring(int(r.u8()))
	r.take(3)           // cipher, mac, zip
	r.take(int(r.u8())) // realm
	r.u32()             // ttl
	r.take(int(r.u8())) // address the credential was encoded on
	out.encodedAt = int64(r.u32())
	out.decodedAt = int64(r.u32())
	out.uid = r.u32()
	out.gid = r.u32()
	r.u32() // auth_uid
	r.u32() // auth_gid
	n := int(r.u32())
	data := r.take(n)
	if r.err != nil {
		if out.code != eSuccess {
			// An error response munged cut short still says what went wrong.
			return result{code: out.code, msg: out.msg}, nil
		}
		return result{}, r.err
	}
	if n > 0 {
		out.payload = data // body is this response's own buffer
	}
	return out, nil
}

// strerror is munge_strerror: the text of a code munged sent without a message.
func strerror(code int) string {
	switch code {
	case eSuccess:
		return "Success"
	case eSnafu:
		return "Internal error"
	case eBadArg:
		return "Invalid argument"
	case eBadLength:
		return "Exceeded maximum message length"
	case eOverflow:
		return "Buffer overflow"
	case eNoMemory:
		return "Out of memory"
	case eSocket:
		return "Socket communication error"
	case eTimeout:
		return "Socket timeout"
	case eBadCred:
		return "Invalid credential format"
	case eBadVersion:
		return "Invalid credential version"
	case eBadCipher:
		return "Invalid cipher type"
	case eBadMAC:
		return "Invalid MAC type"
	case eBadZip:
		return "Invalid compression type"
	case eBadRealm:
		return "Unrecognized security realm"
	case eCredInvalid:
		return "Invalid credential"
	case eCredExpired:
		return "Expired credential"
	case eCredRewound:
		return "Rewound credential"
	case eCredReplayed:
		return "Replayed credential"
	case eCredUnauthorized:
		return "Unauthorized credential"
	}
	return "Unknown error"
}
