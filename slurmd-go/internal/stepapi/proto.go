package stepapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Request is step_msg_t (src/common/stepd_api.h): the int that starts each
// request on the step socket. RequestJobNotify is not in that enum: slurmd
// sends the message type REQUEST_JOB_NOTIFY (4022) there.
type Request int32

// Requests of Slurm 22.05, numbered as in stepd_api.h.
const (
	RequestConnect         Request = 0 // unused by 22.05 servers
	RequestSignalContainer Request = 4
	RequestState           Request = 5
	RequestAttach          Request = 7
	RequestPidInContainer  Request = 8
	RequestDaemonPID       Request = 9
	RequestStepSuspend     Request = 10
	RequestStepResume      Request = 11
	RequestStepTerminate   Request = 12
	RequestStepTaskInfo    Request = 14
	RequestStepListPIDs    Request = 15
	RequestStepReconfigure Request = 16
	RequestStepStat        Request = 17
	RequestStepCompletion  Request = 18
	RequestStepMemLimits   Request = 19
	RequestStepUID         Request = 20
	RequestStepNodeID      Request = 21
	RequestAddExternPID    Request = 22
	RequestX11Display      Request = 23
	RequestGetPW           Request = 24
	RequestGetGR           Request = 25
	RequestGetNSFD         Request = 26
	RequestGetHost         Request = 27
	RequestGetNSFDs        Request = 28   // 26.05: the namespaces to join, with their fds
	RequestJobNotify       Request = 4022 // REQUEST_JOB_NOTIFY (a slurm_msg_type_t)
)

var requestNames = map[Request]string{
	RequestConnect: "REQUEST_CONNECT", RequestSignalContainer: "REQUEST_SIGNAL_CONTAINER",
	RequestState: "REQUEST_STATE", RequestAttach: "REQUEST_ATTACH",
	RequestPidInContainer: "REQUEST_PID_IN_CONTAINER", RequestDaemonPID: "REQUEST_DAEMON_PID",
	RequestStepSuspend: "REQUEST_STEP_SUSPEND", RequestStepResume: "REQUEST_STEP_RESUME",
	RequestStepTerminate: "REQUEST_STEP_TERMINATE", RequestStepTaskInfo: "REQUEST_STEP_TASK_INFO",
	RequestStepListPIDs: "REQUEST_STEP_LIST_PIDS", RequestStepReconfigure: "REQUEST_STEP_RECONFIGURE",
	RequestStepStat: "REQUEST_STEP_STAT", RequestStepCompletion: "REQUEST_STEP_COMPLETION",
	RequestStepMemLimits: "REQUEST_STEP_MEM_LIMITS", RequestStepUID: "REQUEST_STEP_UID",
	RequestStepNodeID: "REQUEST_STEP_NODEID", RequestAddExternPID: "REQUEST_ADD_EXTERN_PID",
	RequestX11Display: "REQUEST_X11_DISPLAY", RequestGetPW: "REQUEST_GETPW",
	RequestGetGR: "REQUEST_GETGR", RequestGetNSFD: "REQUEST_GET_NS_FD",
	RequestGetHost: "REQUEST_GETHOST", RequestGetNSFDs: "REQUEST_GET_NS_FDS",
	RequestJobNotify: "REQUEST_JOB_NOTIFY",
}

func (r Request) String() string {
	if n, ok := requestNames[r]; ok {
		return n
	}
	return fmt.Sprintf("Request(%d)", int32(r))
}

// State is slurmstepd_state_t.
type State int32

// Step states (stepd_api.h).
const (
	StateNotRunning State = 0
	StateStarting   State = 1
	StateRunning    State = 2
	StateEnding     State = 3
)

func (s State) String() string {
	switch s {
	case StateNotRunning:
		return "not running"
	case StateStarting:
		return "starting"
	case StateRunning:
		return "running"
	case StateEnding:
		return "ending"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Protocol versions exchanged in the handshake, as C ints.
const (
	// ProtocolVersion is SLURM_PROTOCOL_VERSION of 22.05 (0x2600).
	ProtocolVersion int32 = 0x2600
	// MinProtocolVersion is SLURM_MIN_PROTOCOL_VERSION: servers refuse
	// clients announcing less.
	MinProtocolVersion int32 = 0x2400
)

// Modes of REQUEST_GETPW / REQUEST_GETGR (stepd_api.h).
const (
	GetPWMatchUserAndPID = 0
	GetPWMatchAlways     = 1
	GetPWMatchPID        = 2
)

// SockaddrStorageSize is sizeof(slurm_addr_t) (struct sockaddr_storage)
// on Linux: REQUEST_ATTACH carries two of them raw.
const SockaddrStorageSize = 128

// MaxWireString bounds strings and byte blobs read from the socket (a
// notify message, a user name, a jobacct buffer), so a peer cannot make the
// other side allocate without limit.
const MaxWireString = 1 << 20

// ErrProtocol is wrapped by errors about malformed socket traffic.
var ErrProtocol = errors.New("stepapi: protocol error")

// Wire reads and writes the native-endian C values of the step socket. It
// wraps any io.ReadWriter (a *net.UnixConn in practice). Not safe for
// concurrent use; the server and the client each use one per connection.
type Wire struct {
	RW  io.ReadWriter
	buf [8]byte
}

// ReadInt32 reads a C int (also uid_t, gid_t, pid_t, enums).
func (w *Wire) ReadInt32() (int32, error) {
	if _, err := io.ReadFull(w.RW, w.buf[:4]); err != nil {
		return 0, err
	}
	return int32(binary.NativeEndian.Uint32(w.buf[:4])), nil
}

// ReadUint32 reads a uint32_t.
func (w *Wire) ReadUint32() (uint32, error) {
	v, err := w.ReadInt32()
	return uint32(v), err
}

// ReadUint16 reads a uint16_t.
func (w *Wire) ReadUint16() (uint16, error) {
	if _, err := io.ReadFull(w.RW, w.buf[:2]); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint16(w.buf[:2]), nil
}

// ReadUint64 reads a uint64_t.
func (w *Wire) ReadUint64() (uint64, error) {
	if _, err := io.ReadFull(w.RW, w.buf[:8]); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint64(w.buf[:8]), nil
}

// ReadBool reads a C bool (one byte).
func (w *Wire) ReadBool() (bool, error) {
	if _, err := io.ReadFull(w.RW, w.buf[:1]); err != nil {
		return false, err
	}
	return w.buf[0] != 0, nil
}

// ReadBytes reads n raw bytes (n ≤ MaxWireString).
func (w *Wire) ReadBytes(n int) ([]byte, error) {
	if n < 0 || n > MaxWireString {
		return nil, fmt.Errorf("%w: length %d", ErrProtocol, n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(w.RW, b)
	return b, err
}

// ReadLenBytes reads an int length then that many bytes.
func (w *Wire) ReadLenBytes() ([]byte, error) {
	n, err := w.ReadInt32()
	if err != nil {
		return nil, err
	}
	return w.ReadBytes(int(n))
}

// Out accumulates one reply or request so it goes out in one write.
type Out struct{ B []byte }

// Int32 appends a C int.
func (o *Out) Int32(v int32) { o.B = binary.NativeEndian.AppendUint32(o.B, uint32(v)) }

// Uint32 appends a uint32_t.
func (o *Out) Uint32(v uint32) { o.B = binary.NativeEndian.AppendUint32(o.B, v) }

// Uint16 appends a uint16_t.
func (o *Out) Uint16(v uint16) { o.B = binary.NativeEndian.AppendUint16(o.B, v) }

// Uint64 appends a uint64_t.
func (o *Out) Uint64(v uint64) { o.B = binary.NativeEndian.AppendUint64(o.B, v) }

// Bool appends a C bool.
func (o *Out) Bool(v bool) {
	if v {
		o.B = append(o.B, 1)
	} else {
		o.B = append(o.B, 0)
	}
}

// Bytes appends raw bytes.
func (o *Out) Bytes(b []byte) { o.B = append(o.B, b...) }

// LenString appends an int length and the bytes of s (no NUL), the
// layout of getpw/getgr replies.
func (o *Out) LenString(s string) {
	o.Int32(int32(min(len(s), math.MaxInt32)))
	o.B = append(o.B, s...)
}

// Send writes the accumulated bytes.
func (o *Out) Send(w io.Writer) error {
	_, err := w.Write(o.B)
	return err
}
