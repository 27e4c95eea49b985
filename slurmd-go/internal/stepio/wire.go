package stepio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MsgType is the type field of an I/O frame header (io_hdr.h SLURM_IO_*).
type MsgType uint16

// Frame types. Stdout/Stderr flow stepd→srun, Stdin/AllStdin srun→stepd,
// ConnectionTest both ways (srun probes, the stepd answers).
const (
	TypeStdin          MsgType = 0
	TypeStdout         MsgType = 1
	TypeStderr         MsgType = 2
	TypeAllStdin       MsgType = 3
	TypeConnectionTest MsgType = 4
)

func (t MsgType) String() string {
	switch t {
	case TypeStdin:
		return "STDIN"
	case TypeStdout:
		return "STDOUT"
	case TypeStderr:
		return "STDERR"
	case TypeAllStdin:
		return "ALLSTDIN"
	case TypeConnectionTest:
		return "CONNECTION_TEST"
	}
	return fmt.Sprintf("MsgType(%d)", uint16(t))
}

const (
	// MaxMsgLen is the largest frame payload (io_hdr.h MAX_MSG_LEN).
	MaxMsgLen = 1024
	// HeaderLen is the packed header: u16 type, u16 gtaskid, u16 ltaskid, u32 length.
	HeaderLen = 10
	// MaxFrameLen is the largest frame on the wire.
	MaxFrameLen = HeaderLen + MaxMsgLen

	// AllTasks is the gtaskid/ltaskid srun puts in ALLSTDIN frames ((uint16_t)-1).
	AllTasks uint16 = 0xffff
)

// Init message versions. A 22.05 stepd sends ProtocolVersion to an srun of
// protocol 21.08 or newer and the legacy layout to older ones (io.c
// _send_io_init_msg); a 22.05 srun rejects LegacyIOVersion and anything
// below 20.11 (io_hdr.c io_init_msg_validate).
const (
	ProtocolVersion     uint16 = 0x2600 // SLURM_22_05_PROTOCOL_VERSION
	LegacyIOVersion     uint16 = 0xb001 // IO_PROTOCOL_VERSION
	protocolVersion2108 uint16 = 0x2500
	protocolVersion2411 uint16 = 0x2A00
	minProtocolVersion  uint16 = 0x2400 // SLURM_MIN_PROTOCOL_VERSION (20.11)

	// legacyKeyLen is SLURM_IO_KEY_SIZE: the legacy layout truncates or
	// zero-pads the key to 8 bytes.
	legacyKeyLen = 8
	// maxInitLen caps what ReadInit accepts; srun trusts the length, we
	// do not (a munge credential is well under 1 KiB).
	maxInitLen = 64 << 10
)

// Wire errors.
var (
	ErrShortBuffer  = errors.New("stepio: short buffer")
	ErrFrameTooLong = errors.New("stepio: frame payload exceeds MaxMsgLen")
	ErrBadVersion   = errors.New("stepio: unsupported I/O init version")
	ErrInitTooLong  = errors.New("stepio: I/O init message too long")
)

// InitVersion is the init message version a step manager uses for an srun
// (or sattach) speaking protocol srunProtocol: a 22.05 stepd sends its own
// version to any srun of 21.08 or newer, 24.11+ sends the srun's
// (io.c _send_io_init_msg, srun->protocol_version).
func InitVersion(srunProtocol uint16) uint16 {
	switch {
	case srunProtocol >= protocolVersion2411:
		return srunProtocol
	case srunProtocol >= protocolVersion2108:
		return ProtocolVersion
	}
	return LegacyIOVersion
}

// Header is the 10-byte frame header (io_hdr_t). Length 0 on STDOUT/STDERR
// /STDIN/ALLSTDIN is the end-of-stream marker.
type Header struct {
	Type    MsgType
	GTaskID uint16
	LTaskID uint16
	Length  uint32
}

// Append appends the packed header to dst.
func (h Header) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Type))
	dst = binary.BigEndian.AppendUint16(dst, h.GTaskID)
	dst = binary.BigEndian.AppendUint16(dst, h.LTaskID)
	return binary.BigEndian.AppendUint32(dst, h.Length)
}

// ParseHeader decodes the first HeaderLen bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("stepio: header: %w", ErrShortBuffer)
	}
	return Header{
		Type:    MsgType(binary.BigEndian.Uint16(b[0:])),
		GTaskID: binary.BigEndian.Uint16(b[2:]),
		LTaskID: binary.BigEndian.Uint16(b[4:]),
		Length:  binary.BigEndian.Uint32(b[6:]),
	}, nil
}

// AppendFrame appends a header with Length = len(payload), then payload.
func AppendFrame(dst []byte, h Header, payload []byte) ([]byte, error) {
	if len(payload) > MaxMsgLen {
		return dst, ErrFrameTooLong
	}
	h.Length = uint32(len(payload))
	return append(h.Append(dst), payload...), nil
}

// ReadFrame reads one frame from r. The payload is read into buf (which must
// hold MaxMsgLen bytes) and the returned slice aliases it. A header whose
// length exceeds MaxMsgLen yields ErrFrameTooLong: the stream cannot be
// resynchronised after that, so the caller drops the connection.
func ReadFrame(r io.Reader, buf []byte) (Header, []byte, error) {
	var hb [HeaderLen]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, nil, err
	}
	h, _ := ParseHeader(hb[:])
	if h.Length > MaxMsgLen {
		return h, nil, fmt.Errorf("stepio: %s frame of %d bytes: %w", h.Type, h.Length, ErrFrameTooLong)
	}
	if len(buf) < int(h.Length) {
		return h, nil, fmt.Errorf("stepio: read frame: %w", ErrShortBuffer)
	}
	p := buf[:h.Length]
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, fmt.Errorf("stepio: read %s payload: %w", h.Type, err)
	}
	return h, p, nil
}

// InitMsg is the first message on every I/O connection, stepd→srun
// (io_init_msg_t). IOKey is the job credential's signature bytes exactly as
// received (the munge string including its trailing NUL); srun compares it
// byte for byte. StdoutObjs/StderrObjs are how many STDOUT and STDERR EOF
// frames srun will wait for on this connection before closing it.
type InitMsg struct {
	Version    uint16
	NodeID     uint32
	StdoutObjs uint32
	StderrObjs uint32
	IOKey      []byte
}

// Marshal packs the init message as io_init_msg_write_to_fd sends it. For
// 21.08+ versions: u32 length of what follows, u16 version, u32 nodeid, u32
// stdout_objs, u32 stderr_objs, u32 key length, key. For LegacyIOVersion:
// no length prefix and the key cut or zero-padded to 8 bytes.
func (m InitMsg) Marshal() ([]byte, error) {
	switch {
	case m.Version == LegacyIOVersion:
		b := make([]byte, 0, 2+4*3+4+legacyKeyLen)
		b = binary.BigEndian.AppendUint16(b, m.Version)
		b = binary.BigEndian.AppendUint32(b, m.NodeID)
		b = binary.BigEndian.AppendUint32(b, m.StdoutObjs)
		b = binary.BigEndian.AppendUint32(b, m.StderrObjs)
		b = binary.BigEndian.AppendUint32(b, legacyKeyLen)
		var key [legacyKeyLen]byte
		copy(key[:], m.IOKey)
		return append(b, key[:]...), nil
	case m.Version < minProtocolVersion:
		return nil, fmt.Errorf("stepio: marshal init version %#x: %w", m.Version, ErrBadVersion)
	}
	body := 2 + 4*3 + 4 + len(m.IOKey)
	b := make([]byte, 0, 4+body)
	b = binary.BigEndian.AppendUint32(b, uint32(body))
	b = binary.BigEndian.AppendUint16(b, m.Version)
	b = binary.BigEndian.AppendUint32(b, m.NodeID)
	b = binary.BigEndian.AppendUint32(b, m.StdoutObjs)
	b = binary.BigEndian.AppendUint32(b, m.StderrObjs)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.IOKey)))
	return append(b, m.IOKey...), nil
}

// ParseInit decodes the body of a 21.08+ init message (the bytes after the
// u32 length), as a 22.05 srun does; the legacy version is rejected there too.
// Trailing bytes are ignored, as srun ignores them.
func ParseInit(body []byte) (InitMsg, error) {
	var m InitMsg
	if len(body) < 2 {
		return m, fmt.Errorf("stepio: init version: %w", ErrShortBuffer)
	}
	m.Version = binary.BigEndian.Uint16(body)
	if m.Version == LegacyIOVersion || m.Version < minProtocolVersion {
		return m, fmt.Errorf("stepio: init version %#x: %w", m.Version, ErrBadVersion)
	}
	if len(body) < 18 {
		return m, fmt.Errorf("stepio: init fields: %w", ErrShortBuffer)
	}
	m.NodeID = binary.BigEndian.Uint32(body[2:])
	m.StdoutObjs = binary.BigEndian.Uint32(body[6:])
	m.StderrObjs = binary.BigEndian.Uint32(body[10:])
	n := binary.BigEndian.Uint32(body[14:])
	if uint64(n) > uint64(len(body)-18) {
		return m, fmt.Errorf("stepio: init io_key of %d bytes: %w", n, ErrShortBuffer)
	}
	if n > 0 {
		m.IOKey = append([]byte(nil), body[18:18+n]...)
	}
	return m, nil
}

// ReadInit reads a length-prefixed init message (srun's side of the
// handshake; used by tests and tools). The caller bounds the wait with a
// read deadline.
func ReadInit(r io.Reader) (InitMsg, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return InitMsg{}, fmt.Errorf("stepio: read init length: %w", err)
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n > maxInitLen {
		return InitMsg{}, fmt.Errorf("stepio: init length %d: %w", n, ErrInitTooLong)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return InitMsg{}, fmt.Errorf("stepio: read init body: %w", err)
	}
	return ParseInit(body)
}
