package slurmproto

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// AuthBlock is the auth section between header and body: u32 plugin id then
// plugin data. auth/munge and auth/slurm both put one packstr there: the
// munge credential or the JWT. A header with FlagNoAuthCred has no auth
// block at all (replies from 24.11 on): its AuthBlock is the zero value.
type AuthBlock struct {
	PluginID uint32
	// Cred is the munge credential "MUNGE:...:" or the auth/slurm token,
	// without the trailing NUL (PluginID AuthPluginMunge or AuthPluginSlurm).
	Cred string
	// Raw holds the plugin data verbatim for other plugins (jwt, none), so
	// such frames still decode and re-encode unchanged.
	Raw []byte
}

// HasCredString reports whether the plugin's data is one packstr (munge, slurm).
func (a AuthBlock) HasCredString() bool {
	return a.PluginID == AuthPluginMunge || a.PluginID == AuthPluginSlurm
}

// Message is one decoded frame.
type Message struct {
	Header Header
	Auth   AuthBlock
	// Body is exactly Header.BodyLength bytes (aliasing the frame); decode
	// it with DecodeBody(Header.Version, Header.MsgType, Body).
	Body []byte
	// AuthAndBody is every byte after the header (aliasing the frame). A
	// forwarder relays it untouched behind a new header (EncodeForward),
	// reusing the originator's credential as Slurm does.
	AuthAndBody []byte
}

// ReadFrame reads one length-prefixed frame from r and returns it without
// the 4-byte length. A length above max (or above MaxMessageSize) fails with
// ErrTooLarge before anything is allocated; large frames grow their buffer
// only as bytes actually arrive.
func ReadFrame(r io.Reader, max uint32) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, wrap("read frame length", err)
	}
	n := binary.BigEndian.Uint32(lb[:])
	if max == 0 || max > MaxMessageSize {
		max = MaxMessageSize
	}
	if n > max {
		return nil, fmt.Errorf("%w: frame length %d exceeds %d", ErrTooLarge, n, max)
	}
	const direct = 1 << 16
	if n <= direct {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("slurmproto: read frame body (%d bytes): %w", n, noEOF(err))
		}
		return b, nil
	}
	var buf bytes.Buffer
	buf.Grow(direct)
	got, err := io.CopyN(&buf, r, int64(n))
	if err != nil {
		return nil, fmt.Errorf("slurmproto: read frame body (%d of %d bytes): %w", got, n, noEOF(err))
	}
	return buf.Bytes(), nil
}

// noEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteFrame writes the length prefix and frame to w in one Write.
func WriteFrame(w io.Writer, frame []byte) error {
	b := make([]byte, 4, 4+len(frame))
	binary.BigEndian.PutUint32(b, uint32(len(frame)))
	_, err := w.Write(append(b, frame...))
	return err
}

// DecodeMessage decodes a frame (without the 4-byte length): header, auth
// block, and the body bytes (not decoded; see DecodeBody). The returned
// slices alias frame.
func DecodeMessage(frame []byte) (*Message, error) {
	u := NewUnpacker(frame)
	h, err := DecodeHeader(u)
	if err != nil {
		return &Message{Header: h}, err
	}
	m := &Message{Header: h, AuthAndBody: frame[u.Offset():]}
	if int64(h.BodyLength) > int64(u.Remaining()) {
		return m, fmt.Errorf("%w: body_length %d but %d bytes follow the header",
			ErrShortBuffer, h.BodyLength, u.Remaining())
	}
	bodyStart := len(frame) - int(h.BodyLength)
	m.Body = frame[bodyStart:]
	if h.Flags&FlagNoAuthCred != 0 {
		if bodyStart != u.Offset() {
			return m, fmt.Errorf("%w: %d bytes between header and body of a frame without auth block",
				ErrMalformed, bodyStart-u.Offset())
		}
		return m, nil
	}
	a, err := decodeAuth(NewUnpacker(frame[u.Offset():bodyStart]))
	if err != nil {
		return m, err
	}
	m.Auth = a
	return m, nil
}

// DecodeAuth decodes an auth block that must fill b exactly.
func DecodeAuth(b []byte) (AuthBlock, error) { return decodeAuth(NewUnpacker(b)) }

func decodeAuth(u *Unpacker) (AuthBlock, error) {
	var a AuthBlock
	var err error
	if a.PluginID, err = u.U32(); err != nil {
		return a, wrap("auth block", err)
	}
	if !a.HasCredString() {
		a.Raw, _ = u.Raw(u.Remaining())
		return a, nil
	}
	if a.Cred, err = u.Str(); err != nil {
		return a, wrap("auth credential", err)
	}
	if err := u.Done(); err != nil {
		return a, wrap("auth block and body_length disagree", err)
	}
	return a, nil
}

// PackAuth appends the auth block to p.
func PackAuth(p *Packer, a AuthBlock) {
	p.U32(a.PluginID)
	if a.HasCredString() {
		p.Str(a.Cred)
		return
	}
	p.Raw(a.Raw)
}

// EncodeMessage returns the complete frame, with its 4-byte length prefix,
// for header h (BodyLength is set from body), auth block a and body. With
// FlagNoAuthCred in h.Flags, a is ignored and no auth block is packed.
func EncodeMessage(h Header, a AuthBlock, body []byte) []byte {
	h.BodyLength = uint32(len(body))
	p := NewPacker(128 + len(a.Cred) + len(body))
	p.U32(0)
	PackHeader(p, h)
	if h.Flags&FlagNoAuthCred == 0 {
		PackAuth(p, a)
	}
	p.Raw(body)
	b := p.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// EncodeForward returns a frame (with length prefix) made of header h and
// the untouched auth+body bytes of a received message. h.BodyLength must be
// the original body length (it is not recomputed).
func EncodeForward(h Header, authAndBody []byte) []byte {
	p := NewPacker(64 + len(authAndBody))
	p.U32(0)
	PackHeader(p, h)
	p.Raw(authAndBody)
	b := p.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}
