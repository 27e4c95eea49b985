package pmix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types of the helper protocol (slurmd-go/pmixhelper/README.md).
const (
	// step manager → helper
	msgJob         byte = 'J' // NUL-terminated key=value strings
	msgFenceResult byte = 'F' // u32 fence | i32 status | data
	msgModexServe  byte = 'D' // u32 request | u32 rank
	msgModexReply  byte = 'R' // u32 request | i32 status | data
	msgQuit        byte = 'Q' // empty

	// helper → step manager
	msgEnv         byte = 'E' // u32 rank | NUL-terminated NAME=value strings
	msgReady       byte = 'O' // empty: every local task's environment is out
	msgFence       byte = 'f' // u32 fence | u8 collect | u32 n | n × u32 rank | data
	msgModexReq    byte = 'm' // u32 request | u32 rank
	msgModexAnswer byte = 'd' // u32 request | i32 status | data
	msgAbort       byte = 'a' // i32 status | u32 rank | message
	msgError       byte = 'x' // message; the helper exits after it
)

// maxFrame bounds one frame (the helper has the same bound): a larger
// length is a broken peer, not a job.
const maxFrame = 1 << 30

// rankWildcard is PMIX_RANK_WILDCARD: every rank of the namespace.
const rankWildcard = 0xfffffffe

// PMIx status codes the step manager hands the helper.
const (
	pmixSuccess    int32 = 0
	pmixError      int32 = -1
	pmixErrTimeout int32 = -24 // PMIX_ERR_TIMEOUT
)

// ErrProtocol is a frame the peer should not have sent.
var ErrProtocol = errors.New("pmix: helper protocol error")

type frame struct {
	typ     byte
	payload []byte
}

// writeFrame writes one frame: u32 big-endian length of type and payload,
// the type, the parts. Callers serialize writes.
func writeFrame(w io.Writer, typ byte, parts ...[]byte) error {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	if n > maxFrame {
		return fmt.Errorf("%w: a %d-byte frame is over the %d-byte bound", ErrProtocol, n, maxFrame)
	}
	buf := make([]byte, 5, 5+n-1)
	binary.BigEndian.PutUint32(buf, uint32(n))
	buf[4] = typ
	for _, p := range parts {
		buf = append(buf, p...)
	}
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame; io.EOF only at a frame boundary.
func readFrame(r io.Reader) (frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1 || n > maxFrame {
		return frame{}, fmt.Errorf("%w: frame length %d", ErrProtocol, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return frame{}, fmt.Errorf("%w: frame cut short: %w", ErrProtocol, noEOF(err))
	}
	return frame{typ: buf[0], payload: buf[1:]}, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// idStatus splits the "u32 id | i32 status | data" payloads.
func idStatus(f frame) (id uint32, status int32, data []byte, err error) {
	if len(f.payload) < 8 {
		return 0, 0, nil, fmt.Errorf("%w: '%c' frame of %d bytes", ErrProtocol, f.typ, len(f.payload))
	}
	return binary.BigEndian.Uint32(f.payload), int32(binary.BigEndian.Uint32(f.payload[4:])), f.payload[8:], nil
}

// cstrings splits NUL-terminated strings; the payload must end in a NUL.
func cstrings(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[len(b)-1] != 0 {
		return nil, fmt.Errorf("%w: strings not NUL-terminated", ErrProtocol)
	}
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out, nil
}

// fenceMsg is a helper's local fence contribution.
type fenceMsg struct {
	id      uint32
	collect bool
	ranks   []uint32
	data    []byte
}

func parseFence(f frame) (fenceMsg, error) {
	p := f.payload
	if len(p) < 9 {
		return fenceMsg{}, fmt.Errorf("%w: fence frame of %d bytes", ErrProtocol, len(p))
	}
	m := fenceMsg{id: binary.BigEndian.Uint32(p), collect: p[4] != 0}
	n := binary.BigEndian.Uint32(p[5:])
	if uint64(len(p)-9) < uint64(n)*4 {
		return fenceMsg{}, fmt.Errorf("%w: fence frame names %d ranks in %d bytes", ErrProtocol, n, len(p)-9)
	}
	m.ranks = make([]uint32, n)
	for i := range m.ranks {
		m.ranks[i] = binary.BigEndian.Uint32(p[9+4*i:])
	}
	m.data = p[9+4*int(n):]
	return m, nil
}
