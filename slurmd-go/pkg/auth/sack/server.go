package sack

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/sockserve"
)

// Socket paths of stock daemons. slurmd (both releases) and 24.11 sackd
// listen on DefaultSocket, slurmctld and slurmdbd on theirs; 26.05 sackd
// honours systemd's RUNTIME_DIRECTORY (a /run/<dir>), which clients reach
// as /run/slurm-<cluster>/sack.socket. No setting moves slurmd's socket, so
// several slurmds on one host share one path and the last one started
// owns it (stock never removes it on exit for that reason).
const (
	DefaultSocket   = "/run/slurm/sack.socket"
	SlurmctldSocket = "/run/slurmctld/sack.socket"
	SlurmdbdSocket  = "/run/slurmdbd/sack.socket"
)

// Named timeouts.
const (
	// DefaultRequestTimeout bounds one connection: reading the request,
	// minting or verifying, writing the answer. Stock clients send the whole
	// request at once and read straight after.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxConns bounds connections served at once; more wait in the
	// listen backlog.
	DefaultMaxConns = 128
)

// Service mints and verifies tokens for a Server; authslurm.Auth is one.
// Both are called from connection goroutines, concurrently.
type Service interface {
	// MintSACK makes a "sack" token for the peer uid/gid, readable by ruid,
	// carrying data.
	MintSACK(ctx context.Context, uid, gid, ruid uint32, data []byte) (string, error)
	// VerifySACK checks a token for a peer running as uid.
	VerifySACK(ctx context.Context, token string, uid uint32) error
}

// Peer is the process at the other end of a connection (SO_PEERCRED).
type Peer struct {
	UID, GID uint32
	PID      int32
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Service Service // required
	// Version is the protocol version of the release served: from 26.05
	// (0x2D00) on, a failed VERIFY is answered by closing the connection;
	// before, by u32 0xffffffff (SLURM_ERROR). 0 means 24.11's.
	Version uint16
	// RequestTimeout: 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxConns: 0 means DefaultMaxConns.
	MaxConns int
	Logger   hclog.Logger
}

// Server serves SACK on a unix socket. Serve runs its accept loop; Close
// stops it. Safe for concurrent use.
type Server struct {
	svc     Service
	version uint16
	timeout time.Duration
	log     hclog.Logger
	srv     *sockserve.Server
}

// NewServer returns a Server; it does not listen yet (Listen or Serve).
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Service == nil {
		return nil, errors.New("sack: server without a Service")
	}
	s := &Server{svc: cfg.Service, version: cfg.Version, timeout: cfg.RequestTimeout, log: cfg.Logger}
	if s.timeout <= 0 {
		s.timeout = DefaultRequestTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	s.log = s.log.Named("sack")
	s.srv = sockserve.New(cfg.MaxConns, func(ctx context.Context, c net.Conn) { s.serveConn(ctx, c.(*net.UnixConn)) })
	return s, nil
}

// Listen prepares path's directory as stock _prepare_run_dir does (owner:
// dirOwner, SlurmUser on 24.11, SlurmdUser on 26.05 slurmd), binds a
// socket of mode 0777 (stock binds under umask 0: any local user may ask
// for a token) in place of whatever is at path and returns the listener.
func Listen(path string, dirOwner uint32, log hclog.Logger) (*net.UnixListener, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if err := PrepareDir(filepath.Dir(path), dirOwner, log); err != nil {
		return nil, err
	}
	// Node daemons of one host share the path. Stock unlinks and binds,
	// which can fail when another daemon binds in between; binding a
	// private name and renaming it over path has no such window: the
	// last daemon to rename keeps the path, as the last stock one does.
	tmp, err := privateName(path)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("sack: [%s] Unable to bind UNIX socket: %w", path, err)
	}
	// Unlink-on-close would take the socket from a newer daemon that has
	// renamed its own over path since; stock never removes it either.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o777); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("sack: chmod %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("sack: [%s] Unable to bind UNIX socket: %w", path, err)
	}
	return ln, nil
}

// privateName is a name beside path that no other daemon uses; it stays
// short because a socket path must fit sun_path (108 bytes).
func privateName(path string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("sack: naming a socket: %w", err)
	}
	return filepath.Join(filepath.Dir(path), fmt.Sprintf(".sack.%d.%x", os.Getpid(), b)), nil
}

// PrepareDir is stock _prepare_run_dir for one directory: create it 0755
// owned by owner if missing; refuse one that is not a directory or is
// owned by someone other than owner or root (a warning for root).
func PrepareDir(dir string, owner uint32, log hclog.Logger) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		mkErr := os.Mkdir(dir, 0o755)
		if mkErr == nil {
			if err := os.Lchown(dir, int(owner), -1); err != nil {
				return fmt.Errorf("sack: failed to change ownership of %s to uid %d: %w", dir, owner, err)
			}
			return nil
		}
		if !errors.Is(mkErr, os.ErrExist) {
			return fmt.Errorf("sack: failed to create %s: %w", dir, mkErr)
		}
		// Another daemon of the host made it meanwhile: check theirs.
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("sack: could not open %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sack: %s exists but is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != owner {
		if st.Uid != 0 {
			return fmt.Errorf("sack: %s exists but is owned by %d", dir, st.Uid)
		}
		log.Warn("SACK directory exists but is owned by root, not the daemon's user", "dir", dir, "uid", owner)
	}
	return nil
}

// Serve accepts connections on ln until ctx is done or Close is called,
// serving each in its own goroutine (at most MaxConns at once). It returns
// nil after Close or ctx, otherwise the accept error. Serve closes ln.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	err := s.srv.Serve(ctx, ln)
	if errors.Is(err, sockserve.ErrClosed) {
		return nil
	}
	return fmt.Errorf("sack: %w", err)
}

// Close stops Serve; connections being served finish within their timeout.
// The socket file stays (see Listen). Any goroutine.
func (s *Server) Close() error { return s.srv.Close() }

// Shutdown stops accepting, as Close, and waits until every connection
// being served is answered or ctx is done. A daemon that exits with a
// request half-served leaves that client without a token ("failed to create
// token"), while one that has closed its listener sends new clients on to
// slurmctld's socket.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("sack: shutdown with requests still being served: %w", err)
	}
	return nil
}

// serveConn answers one request and closes the connection, as stock does
// (one RPC per connection).
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_ = c.SetDeadline(time.Now().Add(s.timeout))
	peer, err := peerCred(c)
	if err != nil {
		s.log.Error("unable to verify process via kernel", "error", err)
		return
	}
	log := s.log.With("peer_uid", peer.UID, "peer_gid", peer.GID, "peer_pid", peer.PID)

	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		log.Debug("connection closed before a whole header", "error", err)
		return
	}
	h, err := ParseHeader(hdr[:])
	if err != nil {
		log.Error("refusing request", "error", err)
		return
	}
	body := make([]byte, h.BodyLen())
	if _, err := io.ReadFull(c, body); err != nil {
		log.Error("incomplete message", "length", h.Length, "error", err)
		return
	}
	if log.IsTrace() {
		log.Trace("received", "version", h.Version, "rpc", h.RPC)
	}
	switch h.RPC {
	case RPCCreate:
		s.create(ctx, c, peer, body, log)
	case RPCVerify:
		s.verify(ctx, c, peer, body, log)
	default:
		log.Error("_on_connection_data: unexpected rpc", "rpc", h.RPC)
	}
}

func (s *Server) create(ctx context.Context, c *net.UnixConn, peer Peer, body []byte, log hclog.Logger) {
	ruid, data, err := ParseCreate(body)
	if err != nil {
		log.Error("_sack_create: unable to unpack request", "error", err)
		return
	}
	token, err := s.svc.MintSACK(ctx, peer.UID, peer.GID, ruid, data)
	if err != nil {
		log.Error("create_internal() failed", "error", err)
		return
	}
	if _, err := c.Write(packstr(nil, token)); err != nil {
		log.Error("_sack_create: reply failed", "error", err)
	}
}

func (s *Server) verify(ctx context.Context, c *net.UnixConn, peer Peer, body []byte, log hclog.Logger) {
	token, err := ParseVerify(body)
	if err != nil {
		log.Error("_sack_verify: unable to unpack token", "error", err)
		return
	}
	rc := uint32(0)
	if err := s.svc.VerifySACK(ctx, token, peer.UID); err != nil {
		log.Debug("_sack_verify: credential verification failed", "error", err)
		if s.version >= 0x2D00 {
			return // 26.05: no answer
		}
		rc = verifyFailed
	}
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, rc)); err != nil {
		log.Error("_sack_verify: reply failed", "error", err)
	}
}

// peerCred reads SO_PEERCRED.
func peerCred(c *net.UnixConn) (Peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if serr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return Peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
