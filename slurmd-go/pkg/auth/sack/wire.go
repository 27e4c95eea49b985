package sack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// RPC numbers (sack_msg_t: "the 64000 range is reserved for SACK").
const (
	RPCCreate uint32 = 64001
	RPCVerify uint32 = 64002
)

// HeaderLen is a request's fixed part: u16 version, u32 length, u32 rpc.
const HeaderLen = 10

// MaxRequest bounds a request's length field. Stock sets no bound; its
// requests are a message hash (33 bytes) or a token (about 1 KiB).
const MaxRequest = 1 << 20

// verifyFailed is SLURM_ERROR as 24.11 answers a failed VERIFY (htonl(-1)).
const verifyFailed uint32 = 0xffffffff

// ErrMalformed is wrapped by every error about bytes that are not a SACK
// message.
var ErrMalformed = errors.New("sack: malformed message")

// Header is a request's fixed part. Length counts every byte after the
// version: itself, the rpc and the body.
type Header struct {
	Version uint16
	Length  uint32
	RPC     uint32
}

// ParseHeader reads the fixed part of a request.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(b), HeaderLen)
	}
	be := binary.BigEndian
	h := Header{Version: be.Uint16(b), Length: be.Uint32(b[2:]), RPC: be.Uint32(b[6:])}
	if h.Length < HeaderLen-2 {
		return h, fmt.Errorf("%w: length %d is shorter than its own header", ErrMalformed, h.Length)
	}
	if h.Length > MaxRequest {
		return h, fmt.Errorf("%w: length %d over %d", ErrMalformed, h.Length, MaxRequest)
	}
	return h, nil
}

// BodyLen is the number of bytes after the fixed part.
func (h Header) BodyLen() int { return int(h.Length) - (HeaderLen - 2) }

// request frames an rpc with its body (stock sack_create/sack_verify).
func request(version uint16, rpc uint32, body []byte) []byte {
	b := make([]byte, HeaderLen, HeaderLen+len(body))
	be := binary.BigEndian
	be.PutUint16(b, version)
	be.PutUint32(b[2:], uint32(HeaderLen-2+len(body)))
	be.PutUint32(b[6:], rpc)
	return append(b, body...)
}

// CreateRequest is a CREATE: u32 r_uid, packmem(data).
func CreateRequest(version uint16, ruid uint32, data []byte) []byte {
	body := binary.BigEndian.AppendUint32(nil, ruid)
	body = binary.BigEndian.AppendUint32(body, uint32(len(data)))
	return request(version, RPCCreate, append(body, data...))
}

// VerifyRequest is a VERIFY: packstr(token).
func VerifyRequest(version uint16, token string) []byte {
	return request(version, RPCVerify, packstr(nil, token))
}

// ParseCreate reads a CREATE body.
func ParseCreate(body []byte) (ruid uint32, data []byte, err error) {
	if len(body) < 8 {
		return 0, nil, fmt.Errorf("%w: CREATE body of %d bytes", ErrMalformed, len(body))
	}
	ruid = binary.BigEndian.Uint32(body)
	n := binary.BigEndian.Uint32(body[4:])
	if uint64(n) > uint64(len(body)-8) {
		return 0, nil, fmt.Errorf("%w: CREATE data of %d bytes, %d left", ErrMalformed, n, len(body)-8)
	}
	return ruid, body[8 : 8+n], nil
}

// ParseVerify reads a VERIFY body.
func ParseVerify(body []byte) (string, error) {
	s, _, err := unpackstr(body)
	if err != nil {
		return "", fmt.Errorf("%w: VERIFY token: %w", ErrMalformed, err)
	}
	if s == "" {
		return "", fmt.Errorf("%w: VERIFY without a token", ErrMalformed)
	}
	return s, nil
}

// packstr is Slurm's packstr: u32 length with the NUL, the bytes, NUL;
// u32 0 for an empty string.
func packstr(dst []byte, s string) []byte {
	if s == "" {
		return binary.BigEndian.AppendUint32(dst, 0)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)+1))
	dst = append(dst, s...)
	return append(dst, 0)
}

// unpackstr reads a packstr and returns the string and the bytes after it.
func unpackstr(b []byte) (string, []byte, error) {
	if len(b) < 4 {
		return "", nil, errors.New("no length")
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if n == 0 {
		return "", b, nil
	}
	if uint64(n) > uint64(len(b)) {
		return "", nil, fmt.Errorf("string of %d bytes, %d left", n, len(b))
	}
	s := b[:n]
	if s[n-1] != 0 {
		return "", nil, errors.New("string without its NUL")
	}
	if i := bytes.IndexByte(s, 0); i < int(n)-1 {
		return "", nil, errors.New("string with a NUL inside")
	}
	return string(s[:n-1]), b[n:], nil
}
