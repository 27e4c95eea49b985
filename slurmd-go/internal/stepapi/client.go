package stepapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named timeouts of the client.
const (
	// DialTimeout bounds connect plus the version handshake.
	DialTimeout = 5 * time.Second
	// CallTimeout bounds one request when ctx has no deadline. A signal
	// request may legitimately wait for the step to reach Running (the
	// server waits up to two minutes, as stock) or for KillWait (SIG_TERM_KILL).
	CallTimeout = 3 * time.Minute
)

// Conn is a connection to one step manager. Methods are not safe for
// concurrent use (the protocol is strictly request/reply); open one Conn
// per goroutine.
type Conn struct {
	c       *net.UnixConn
	w       Wire
	version int32 // the server's protocol version
	path    string
}

// StepError is a request the step manager answered with a failure: RC is
// its return code (-1 for most), Errno the errno it sent with it.
type StepError struct {
	Req   Request
	RC    int32
	Errno int32
}

func (e *StepError) Error() string {
	msg := fmt.Sprintf("stepapi: %s: rc %d", e.Req, e.RC)
	if e.Errno != 0 {
		msg += ": " + errnoText(e.Errno)
	}
	return msg
}

func errnoText(n int32) string {
	if n > 0 && n < 4096 {
		return syscall.Errno(n).Error()
	}
	return slurmproto.RCName(uint32(n))
}

// Dial connects to the step socket at path and does the version handshake.
func Dial(ctx context.Context, path string) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("stepapi: connect %s: %w", path, err)
	}
	c := &Conn{c: nc.(*net.UnixConn), path: path}
	c.w.RW = c.c
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(dl)
	}
	var o Out
	o.Int32(ProtocolVersion)
	if err := o.Send(c.c); err != nil {
		c.c.Close()
		return nil, fmt.Errorf("stepapi: handshake %s: %w", path, err)
	}
	v, err := c.w.ReadInt32()
	if err != nil {
		c.c.Close()
		return nil, fmt.Errorf("stepapi: handshake %s: %w", path, err)
	}
	if v < 0 {
		c.c.Close()
		return nil, fmt.Errorf("%w: %s refused protocol version 0x%x", ErrProtocol, path, ProtocolVersion)
	}
	c.version = v
	_ = c.c.SetDeadline(time.Time{})
	return c, nil
}

// DialStep connects to the step socket of id on nodeName under spoolDir.
func DialStep(ctx context.Context, spoolDir, nodeName string, id slurmproto.StepID) (*Conn, error) {
	return Dial(ctx, SocketPath(spoolDir, nodeName, id))
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// ServerVersion is the protocol version the step manager announced.
func (c *Conn) ServerVersion() int32 { return c.version }

// Path is the socket path.
func (c *Conn) Path() string { return c.path }

func (c *Conn) begin(ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(CallTimeout)
	}
	_ = c.c.SetDeadline(dl)
}

func (c *Conn) send(o *Out) error { return o.Send(c.c) }

func (c *Conn) wrap(req Request, err error) error {
	if err == nil {
		return nil
	}
	var se *StepError
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("stepapi: %s on %s: %w", req, c.path, err)
}

// rcErrno reads the "int rc, int errno" reply of signal, terminate,
// suspend, resume, reconfigure and completion.
func (c *Conn) rcErrno(req Request) error {
	rc, err := c.w.ReadInt32()
	if err != nil {
		return err
	}
	errnum, err := c.w.ReadInt32()
	if err != nil {
		return err
	}
	if rc != 0 {
		return &StepError{Req: req, RC: rc, Errno: errnum}
	}
	return nil
}

// State returns the step's state (REQUEST_STATE).
func (c *Conn) State(ctx context.Context) (State, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestState))
	if err := c.send(&o); err != nil {
		return StateNotRunning, c.wrap(RequestState, err)
	}
	v, err := c.w.ReadInt32()
	return State(v), c.wrap(RequestState, err)
}

// SignalContainer sends sig (a signal number or one of Slurm's dummy
// signals 991..999) to the step with Kill* flags, on behalf of uid; details
// is printed as "*** REASON: ... ***" with the cancel message (22.05 layout).
func (c *Conn) SignalContainer(ctx context.Context, sig int, flags int, details string, uid uint32) error {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestSignalContainer))
	o.Int32(int32(sig))
	o.Int32(int32(flags))
	o.Int32(int32(len(details)))
	o.Bytes([]byte(details))
	o.Uint32(uid)
	if err := c.send(&o); err != nil {
		return c.wrap(RequestSignalContainer, err)
	}
	return c.wrap(RequestSignalContainer, c.rcErrno(RequestSignalContainer))
}

// Notify writes message to the job's stderr as "slurmstepd-<node>: error:
// <message>" (REQUEST_JOB_NOTIFY; scontrol notify).
func (c *Conn) Notify(ctx context.Context, message string) error {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestJobNotify))
	o.Int32(int32(len(message) + 1))
	o.Bytes(append([]byte(message), 0))
	if err := c.send(&o); err != nil {
		return c.wrap(RequestJobNotify, err)
	}
	rc, err := c.w.ReadInt32()
	if err == nil && rc != 0 {
		return &StepError{Req: RequestJobNotify, RC: rc}
	}
	return c.wrap(RequestJobNotify, err)
}

// Terminate sends SIGKILL to every process of the step
// (REQUEST_STEP_TERMINATE).
func (c *Conn) Terminate(ctx context.Context) error {
	return c.simpleRC(ctx, RequestStepTerminate)
}

// Reconfigure asks the step manager to reopen its log
// (REQUEST_STEP_RECONFIGURE).
func (c *Conn) Reconfigure(ctx context.Context) error {
	return c.simpleRC(ctx, RequestStepReconfigure)
}

func (c *Conn) simpleRC(ctx context.Context, req Request) error {
	c.begin(ctx)
	var o Out
	o.Int32(int32(req))
	if err := c.send(&o); err != nil {
		return c.wrap(req, err)
	}
	return c.wrap(req, c.rcErrno(req))
}

// Suspend stops the step (SIGTSTP, 2 s, SIGSTOP), Resume continues it
// (SIGCONT) (REQUEST_STEP_SUSPEND / _RESUME). Stock slurmd splits each in a
// send and a receive phase to suspend many steps in parallel; run several
// Conns in goroutines for that.
func (c *Conn) Suspend(ctx context.Context, jobCoreSpec uint16) error {
	return c.suspendResume(ctx, RequestStepSuspend, jobCoreSpec)
}

// Resume continues a suspended step.
func (c *Conn) Resume(ctx context.Context, jobCoreSpec uint16) error {
	return c.suspendResume(ctx, RequestStepResume, jobCoreSpec)
}

func (c *Conn) suspendResume(ctx context.Context, req Request, spec uint16) error {
	c.begin(ctx)
	var o Out
	o.Int32(int32(req))
	o.Uint16(spec)
	if err := c.send(&o); err != nil {
		return c.wrap(req, err)
	}
	return c.wrap(req, c.rcErrno(req))
}

// ListPIDs returns every pid of the step (REQUEST_STEP_LIST_PIDS).
func (c *Conn) ListPIDs(ctx context.Context) ([]uint32, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestStepListPIDs))
	if err := c.send(&o); err != nil {
		return nil, c.wrap(RequestStepListPIDs, err)
	}
	n, err := c.w.ReadUint32()
	if err != nil {
		return nil, c.wrap(RequestStepListPIDs, err)
	}
	if n > MaxWireString/4 {
		return nil, fmt.Errorf("%w: %d pids", ErrProtocol, n)
	}
	pids := make([]uint32, 0, n)
	for range n {
		p, err := c.w.ReadUint32()
		if err != nil {
			return nil, c.wrap(RequestStepListPIDs, err)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// TaskInfo is slurmstepd_task_info_t as REQUEST_STEP_TASK_INFO sends it.
type TaskInfo struct {
	ID      int32  // local task id
	GTID    uint32 // global task id
	PID     int32
	Exited  bool
	EStatus int32 // raw wait status when Exited
}

// TaskInfo lists the step's tasks.
func (c *Conn) TaskInfo(ctx context.Context) ([]TaskInfo, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestStepTaskInfo))
	if err := c.send(&o); err != nil {
		return nil, c.wrap(RequestStepTaskInfo, err)
	}
	n, err := c.w.ReadUint32()
	if err != nil {
		return nil, c.wrap(RequestStepTaskInfo, err)
	}
	if n > MaxWireString/17 {
		return nil, fmt.Errorf("%w: %d tasks", ErrProtocol, n)
	}
	tasks := make([]TaskInfo, n)
	for i := range tasks {
		t := &tasks[i]
		if t.ID, err = c.w.ReadInt32(); err == nil {
			if t.GTID, err = c.w.ReadUint32(); err == nil {
				if t.PID, err = c.w.ReadInt32(); err == nil {
					if t.Exited, err = c.w.ReadBool(); err == nil {
						t.EStatus, err = c.w.ReadInt32()
					}
				}
			}
		}
		if err != nil {
			return nil, c.wrap(RequestStepTaskInfo, err)
		}
	}
	return tasks, nil
}

// PidInContainer reports whether pid belongs to the step
// (REQUEST_PID_IN_CONTAINER).
func (c *Conn) PidInContainer(ctx context.Context, pid int) (bool, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestPidInContainer))
	o.Int32(int32(pid))
	if err := c.send(&o); err != nil {
		return false, c.wrap(RequestPidInContainer, err)
	}
	b, err := c.w.ReadBool()
	return b, c.wrap(RequestPidInContainer, err)
}

// DaemonPID returns the step manager's pid (REQUEST_DAEMON_PID).
func (c *Conn) DaemonPID(ctx context.Context) (int, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestDaemonPID))
	if err := c.send(&o); err != nil {
		return -1, c.wrap(RequestDaemonPID, err)
	}
	v, err := c.w.ReadInt32()
	return int(v), c.wrap(RequestDaemonPID, err)
}

// AddExternPID adopts pid into the step (REQUEST_ADD_EXTERN_PID; only the
// extern step accepts it, others answer SLURM_ERROR as stock does).
func (c *Conn) AddExternPID(ctx context.Context, pid int) error {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestAddExternPID))
	o.Int32(int32(pid))
	if err := c.send(&o); err != nil {
		return c.wrap(RequestAddExternPID, err)
	}
	rc, err := c.w.ReadInt32()
	if err == nil && rc != 0 {
		return &StepError{Req: RequestAddExternPID, RC: rc}
	}
	return c.wrap(RequestAddExternPID, err)
}

// MemLimits returns the job and step memory limits in MiB
// (REQUEST_STEP_MEM_LIMITS; the 22.05 server sends two uint64).
func (c *Conn) MemLimits(ctx context.Context) (job, step uint64, err error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestStepMemLimits))
	if err = c.send(&o); err != nil {
		return 0, 0, c.wrap(RequestStepMemLimits, err)
	}
	if job, err = c.w.ReadUint64(); err == nil {
		step, err = c.w.ReadUint64()
	}
	return job, step, c.wrap(RequestStepMemLimits, err)
}

// UID returns the uid the step runs as (REQUEST_STEP_UID).
func (c *Conn) UID(ctx context.Context) (uint32, error) {
	return c.u32(ctx, RequestStepUID)
}

// NodeID returns the node's index in the step (REQUEST_STEP_NODEID).
func (c *Conn) NodeID(ctx context.Context) (uint32, error) {
	return c.u32(ctx, RequestStepNodeID)
}

func (c *Conn) u32(ctx context.Context, req Request) (uint32, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(req))
	if err := c.send(&o); err != nil {
		return 0, c.wrap(req, err)
	}
	v, err := c.w.ReadUint32()
	return v, c.wrap(req, err)
}

// Stat returns the number of tasks with accounting data
// (REQUEST_STEP_STAT). Like stock with jobacct_gather/none, the step
// manager sends no jobacct buffer, only the task count.
func (c *Conn) Stat(ctx context.Context) (int, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestStepStat))
	if err := c.send(&o); err != nil {
		return 0, c.wrap(RequestStepStat, err)
	}
	v, err := c.w.ReadInt32()
	return int(v), c.wrap(RequestStepStat, err)
}

// StepCompletion relays a REQUEST_STEP_COMPLETE from a child node
// (REQUEST_STEP_COMPLETION); jobacct is the packed jobacct (u8 0 for none).
func (c *Conn) StepCompletion(ctx context.Context, first, last, stepRC int32, jobacct []byte) error {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestStepCompletion))
	o.Int32(first)
	o.Int32(last)
	o.Int32(stepRC)
	o.Int32(int32(len(jobacct)))
	o.Bytes(jobacct)
	if err := c.send(&o); err != nil {
		return c.wrap(RequestStepCompletion, err)
	}
	return c.wrap(RequestStepCompletion, c.rcErrno(RequestStepCompletion))
}

// X11Display returns the X11 display number and xauthority file (0, ""
// when X11 forwarding is not set up) (REQUEST_X11_DISPLAY).
func (c *Conn) X11Display(ctx context.Context) (int, string, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestX11Display))
	if err := c.send(&o); err != nil {
		return 0, "", c.wrap(RequestX11Display, err)
	}
	d, err := c.w.ReadInt32()
	if err != nil {
		return 0, "", c.wrap(RequestX11Display, err)
	}
	b, err := c.w.ReadLenBytes()
	if err != nil {
		return 0, "", c.wrap(RequestX11Display, err)
	}
	return int(d), trimNUL(b), nil
}

// Passwd is a passwd entry as REQUEST_GETPW returns it (nss_slurm).
type Passwd struct {
	Name, Passwd string
	UID, GID     uint32
	Gecos, Dir   string
	Shell        string
}

// GetPW looks the step's user up (mode GetPWMatch*); nil when not found.
func (c *Conn) GetPW(ctx context.Context, mode int, uid uint32, name string) (*Passwd, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestGetPW))
	o.Int32(int32(mode))
	o.Uint32(uid)
	o.LenString(name)
	if err := c.send(&o); err != nil {
		return nil, c.wrap(RequestGetPW, err)
	}
	found, err := c.w.ReadInt32()
	if err != nil || found == 0 {
		return nil, c.wrap(RequestGetPW, err)
	}
	var p Passwd
	str := func(dst *string) {
		if err == nil {
			var b []byte
			b, err = c.w.ReadLenBytes()
			*dst = string(b)
		}
	}
	str(&p.Name)
	str(&p.Passwd)
	if err == nil {
		p.UID, err = c.w.ReadUint32()
	}
	if err == nil {
		p.GID, err = c.w.ReadUint32()
	}
	str(&p.Gecos)
	str(&p.Dir)
	str(&p.Shell)
	if err != nil {
		return nil, c.wrap(RequestGetPW, err)
	}
	return &p, nil
}

// Group is a group entry as REQUEST_GETGR returns it: its only member is
// the step's user.
type Group struct {
	Name, Passwd string
	GID          uint32
	Member       string
}

// GetGR looks the step's groups up (mode GetPWMatch* values).
func (c *Conn) GetGR(ctx context.Context, mode int, gid uint32, name string) ([]Group, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestGetGR))
	o.Int32(int32(mode))
	o.Uint32(gid)
	o.LenString(name)
	if err := c.send(&o); err != nil {
		return nil, c.wrap(RequestGetGR, err)
	}
	found, err := c.w.ReadInt32()
	if err != nil || found <= 0 {
		return nil, c.wrap(RequestGetGR, err)
	}
	if found > 1<<16 {
		return nil, fmt.Errorf("%w: %d groups", ErrProtocol, found)
	}
	groups := make([]Group, found)
	for i := range groups {
		g := &groups[i]
		var b []byte
		if b, err = c.w.ReadLenBytes(); err == nil {
			g.Name = string(b)
			if b, err = c.w.ReadLenBytes(); err == nil {
				g.Passwd = string(b)
				if g.GID, err = c.w.ReadUint32(); err == nil {
					if b, err = c.w.ReadLenBytes(); err == nil {
						g.Member = string(b)
					}
				}
			}
		}
		if err != nil {
			return nil, c.wrap(RequestGetGR, err)
		}
	}
	return groups, nil
}

func trimNUL(b []byte) string {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return string(b)
}

// AttachResult is the reply of REQUEST_ATTACH: the step's local tasks.
type AttachResult struct {
	RC          int32
	PIDs        []uint32
	GTIDs       []uint32
	Executables []string
}

// Attach asks the step to connect its I/O to io and send task exits to
// resp (sattach; stepd_attach in 22.05 layout). key is the client's
// credential signature, uid the requester.
func (c *Conn) Attach(ctx context.Context, io, resp netip.AddrPort, key []byte, uid uint32) (*AttachResult, error) {
	c.begin(ctx)
	var o Out
	o.Int32(int32(RequestAttach))
	o.Bytes(SockaddrIn(io))
	o.Bytes(SockaddrIn(resp))
	o.Uint32(uint32(len(key)))
	o.Bytes(key)
	o.Uint32(uid)
	o.Uint16(uint16(ProtocolVersion))
	if err := c.send(&o); err != nil {
		return nil, c.wrap(RequestAttach, err)
	}
	r := &AttachResult{}
	rc, err := c.w.ReadInt32()
	if err != nil {
		return nil, c.wrap(RequestAttach, err)
	}
	r.RC = rc
	if rc != 0 {
		return r, nil
	}
	n, err := c.w.ReadUint32()
	if err != nil {
		return nil, c.wrap(RequestAttach, err)
	}
	if n > MaxWireString/4 {
		return nil, fmt.Errorf("%w: %d tasks", ErrProtocol, n)
	}
	read := func() ([]uint32, error) {
		out := make([]uint32, n)
		for i := range out {
			v, err := c.w.ReadUint32()
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	if r.PIDs, err = read(); err != nil {
		return nil, c.wrap(RequestAttach, err)
	}
	if r.GTIDs, err = read(); err != nil {
		return nil, c.wrap(RequestAttach, err)
	}
	for i := uint32(0); i < n; i++ {
		b, err := c.w.ReadLenBytes()
		if err != nil {
			return nil, c.wrap(RequestAttach, err)
		}
		r.Executables = append(r.Executables, strings.TrimRight(string(b), "\x00"))
	}
	return r, nil
}

// SockaddrIn is an IPv4 address as a raw struct sockaddr_storage (family
// in host order, port and address in network order).
func SockaddrIn(ap netip.AddrPort) []byte {
	b := make([]byte, SockaddrStorageSize)
	if !ap.IsValid() || !ap.Addr().Unmap().Is4() {
		return b
	}
	binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a := ap.Addr().Unmap().As4()
	copy(b[4:8], a[:])
	return b
}

// ParseSockaddrIn reads what SockaddrIn writes.
func ParseSockaddrIn(b []byte) (netip.AddrPort, bool) {
	if len(b) < 8 || binary.NativeEndian.Uint16(b[0:]) != syscall.AF_INET {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), true
}
