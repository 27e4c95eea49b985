package flood

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// maxReply caps a reply frame; a ping or daemon-status reply is a few hundred bytes.
const maxReply = 1 << 20

// ErrKind classifies the outcome of one RPC. The values index Counters.
type ErrKind int

// Outcomes. Protocol errors (BadReply, BadReplyType, BadReplyRC) mean the daemon answered
// something a Slurm client would reject; the others are transport failures.
const (
	OK             ErrKind = iota
	ConnectRefused         // ECONNREFUSED
	ConnectTimeout         // no SYN-ACK before the deadline (listen queue full, SYN dropped)
	AddrNotAvail           // EADDRNOTAVAIL: local ports exhausted
	ConnectOther           // any other dial failure
	Timeout                // connected, but no complete reply before the deadline
	Reset                  // ECONNRESET / EPIPE while writing or reading
	ClosedNoReply          // clean EOF before a reply frame
	BadReply               // reply frame does not decode (header, auth or body)
	BadReplyType           // reply of an unexpected message type
	BadReplyRC             // RESPONSE_SLURM_RC with a non-zero return code
	Other                  // anything else (kept visible, never folded into OK)
	numKinds
)

var kindNames = [numKinds]string{
	OK: "ok", ConnectRefused: "connect_refused", ConnectTimeout: "connect_timeout",
	AddrNotAvail: "addr_not_avail", ConnectOther: "connect_other", Timeout: "timeout",
	Reset: "reset", ClosedNoReply: "closed_no_reply", BadReply: "bad_reply",
	BadReplyType: "bad_reply_type", BadReplyRC: "bad_reply_rc", Other: "other",
}

func (k ErrKind) String() string {
	if k >= 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrKind(%d)", int(k))
}

// Protocol reports whether k is a protocol error (the daemon answered, wrongly).
func (k ErrKind) Protocol() bool { return k == BadReply || k == BadReplyType || k == BadReplyRC }

// Counters counts outcomes by kind. Safe for concurrent use.
type Counters struct{ n [numKinds]atomic.Int64 }

// Add counts one outcome.
func (c *Counters) Add(k ErrKind) { c.n[k].Add(1) }

// Get returns the count of k.
func (c *Counters) Get(k ErrKind) int64 { return c.n[k].Load() }

// Errors returns the non-zero error counts by name (OK excluded).
func (c *Counters) Errors() map[string]int64 {
	m := map[string]int64{}
	for k := ErrKind(1); k < numKinds; k++ {
		if v := c.n[k].Load(); v > 0 {
			m[k.String()] = v
		}
	}
	return m
}

// ErrorTotal is the number of failed RPCs.
func (c *Counters) ErrorTotal() int64 {
	var t int64
	for k := ErrKind(1); k < numKinds; k++ {
		t += c.n[k].Load()
	}
	return t
}

// ProtocolErrors is the number of protocol errors.
func (c *Counters) ProtocolErrors() int64 {
	return c.n[BadReply].Load() + c.n[BadReplyType].Load() + c.n[BadReplyRC].Load()
}

// Dialer opens connections to one target, spreading them over several loopback source
// addresses. Each source address has its own 28k ephemeral ports, and
// IP_BIND_ADDRESS_NO_PORT defers the port choice to connect(2), where the kernel only needs
// the 4-tuple to be unique; with net.ipv4.tcp_tw_reuse=2 (the kernel default, loopback only)
// TIME_WAIT tuples are reused too. Safe for concurrent use.
type Dialer struct {
	target  string
	dialers []*net.Dialer
	next    atomic.Uint64
}

// NewDialer returns a Dialer for target ("127.0.0.1:port") using sources loopback source
// addresses 127.0.0.1..127.0.0.<sources> (only when target is a loopback address).
func NewDialer(target string, sources int) (*Dialer, error) {
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return nil, fmt.Errorf("flood: target %q: %w", target, err)
	}
	d := &Dialer{target: target}
	if !ap.Addr().IsLoopback() || !ap.Addr().Is4() || sources <= 1 {
		d.dialers = []*net.Dialer{{}}
		return d, nil
	}
	for i := 1; i <= sources && i < 255; i++ {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(i))}
		d.dialers = append(d.dialers, &net.Dialer{LocalAddr: src, Control: bindNoPort})
	}
	return d, nil
}

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT before Go binds the source address.
func bindNoPort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// Sources is the number of source addresses in use.
func (d *Dialer) Sources() int { return len(d.dialers) }

// Dial connects before deadline.
func (d *Dialer) Dial(ctx context.Context, deadline time.Time) (net.Conn, error) {
	nd := d.dialers[d.next.Add(1)%uint64(len(d.dialers))]
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return nd.DialContext(ctx, "tcp4", d.target)
}

// classifyDial maps a dial error to its kind.
func classifyDial(err error) ErrKind {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnectRefused
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return AddrNotAvail
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return ConnectTimeout
	case errors.Is(err, syscall.ECONNRESET):
		return Reset
	default:
		return ConnectOther
	}
}

// classifyIO maps a write/read error on an established connection to its kind.
func classifyIO(err error) ErrKind {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return Timeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return Reset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClosedNoReply
	default:
		return Other
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Want says what a correct reply to a request looks like.
type Want struct {
	Type    slurmproto.MsgType // the reply message type, e.g. RESPONSE_PING_SLURMD
	Version uint16             // the reply's header version: the request's
	Plugin  uint32             // the auth plugin of a reply that carries a credential
}

// WantFor returns the expected reply to req (REQUEST_PING or REQUEST_DAEMON_STATUS).
func WantFor(req Request) (Want, error) {
	w := Want{Version: req.Version, Plugin: req.Plugin}
	switch req.Type {
	case slurmproto.RequestPing:
		w.Type = slurmproto.ResponsePingSlurmd
	case slurmproto.RequestDaemonStatus:
		w.Type = slurmproto.ResponseSlurmdStatus
	default:
		return Want{}, fmt.Errorf("flood: no expected reply known for %v", req.Type)
	}
	return w, nil
}

// plugin is the expected credential's plugin (munge when unset: the original 22.05 client).
func (w Want) plugin() uint32 {
	if w.Plugin == 0 {
		return slurmproto.AuthPluginMunge
	}
	return w.Plugin
}

// Result is the outcome of one RPC.
type Result struct {
	Kind ErrKind
	Err  error // detail, nil when Kind is OK
	RC   uint32
}

// RPC runs one Slurm RPC the way slurmctld does: connect, write one frame, read one reply
// frame, close. deadline bounds all of it. The reply must decode completely (header, auth
// block, body of the expected type); its credential is not verified (through munged that
// would double munged's load and measure the client, not the daemon).
func RPC(ctx context.Context, d *Dialer, frame []byte, want Want, deadline time.Time) Result {
	c, err := d.Dial(ctx, deadline)
	if err != nil {
		return Result{Kind: classifyDial(err), Err: err}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := c.SetDeadline(deadline); err != nil {
		return Result{Kind: Other, Err: err}
	}
	if _, err := c.Write(frame); err != nil {
		return Result{Kind: classifyIO(err), Err: err}
	}
	reply, err := slurmproto.ReadFrame(c, maxReply)
	if err != nil {
		if errors.Is(err, slurmproto.ErrTooLarge) {
			return Result{Kind: BadReply, Err: err}
		}
		return Result{Kind: classifyIO(err), Err: err}
	}
	return CheckReply(reply, want)
}

// CheckReply validates a reply frame (without its length prefix): the request's header
// version and, unless the header says SLURM_NO_AUTH_CRED (how 24.11 sends replies; 23.11 and
// later only), a credential of want's plugin.
func CheckReply(reply []byte, want Want) Result {
	m, err := slurmproto.DecodeMessage(reply)
	if err != nil {
		return Result{Kind: BadReply, Err: err}
	}
	if want.Version != 0 && m.Header.Version != want.Version {
		return Result{Kind: BadReply, Err: fmt.Errorf("flood: reply header version 0x%04x, want 0x%04x", m.Header.Version, want.Version)}
	}
	noAuth := m.Header.Flags&slurmproto.FlagNoAuthCred != 0
	switch {
	case noAuth && m.Header.Version < slurmproto.Version2311:
		return Result{Kind: BadReply, Err: fmt.Errorf("flood: reply without auth block (flags 0x%04x) at version 0x%04x", m.Header.Flags, m.Header.Version)}
	case !noAuth && (m.Auth.PluginID != want.plugin() || m.Auth.Cred == ""):
		return Result{Kind: BadReply, Err: fmt.Errorf("flood: reply auth plugin %d, credential %d bytes, want plugin %d", m.Auth.PluginID, len(m.Auth.Cred), want.plugin())}
	}
	body, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		return Result{Kind: BadReply, Err: err}
	}
	if m.Header.MsgType == want.Type {
		return Result{Kind: OK}
	}
	if rc, ok := body.(*slurmproto.ReturnCode); ok {
		return Result{Kind: BadReplyRC, RC: rc.RC, Err: fmt.Errorf("flood: RESPONSE_SLURM_RC %d", rc.RC)}
	}
	if rc, ok := body.(*slurmproto.ReturnCodeMsg); ok {
		return Result{Kind: BadReplyRC, RC: rc.RC, Err: fmt.Errorf("flood: RESPONSE_SLURM_RC_MSG %d", rc.RC)}
	}
	return Result{Kind: BadReplyType, Err: fmt.Errorf("flood: reply %v, want %v", m.Header.MsgType, want.Type)}
}
