package topoapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/sockserve"
)

// Named timeouts and limits.
const (
	// ReadTimeout bounds the wait for a client's request line.
	ReadTimeout = 5 * time.Second
	// WriteTimeout bounds writing the whole reply.
	WriteTimeout = 5 * time.Second
	// MaxConns bounds the connections served at once; more wait in the
	// listen backlog. Any local user can connect.
	MaxConns = 64
	// SocketMode lets the job user's plugin (euid = user) connect.
	SocketMode os.FileMode = 0o666
)

// Listen binds the socket at path with SocketMode, replacing a stale one
// (the daemon holds the pid file, so an older daemon is gone).
func Listen(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("topoapi: listen %s: %w", path, err)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("topoapi: chmod %s: %w", path, err)
	}
	return ln, nil
}

// Server serves the topology API.
type Server struct {
	src Source
	log hclog.Logger
	srv *sockserve.Server
}

// NewServer returns a server answering from src.
func NewServer(src Source, log hclog.Logger) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Server{src: src, log: log.Named("topoapi")}
	s.srv = sockserve.New(MaxConns, func(_ context.Context, c net.Conn) { s.serveConn(c) })
	return s
}

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("topoapi: server closed")

// Serve accepts on ln until ctx ends or Shutdown/Close; it returns
// ErrServerClosed then, or the accept error that stopped it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	err := s.srv.Serve(ctx, ln)
	if errors.Is(err, sockserve.ErrClosed) {
		return ErrServerClosed
	}
	return fmt.Errorf("topoapi: %w", err)
}

// serveConn answers one request. Errors go to the client as an error line
// and to the log with their cause; none ends the server.
func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(ReadTimeout))
	line, err := readLine(bufio.NewReaderSize(c, 4096), MaxRequest)
	if err != nil {
		s.refuse(c, fmt.Errorf("%w: reading the request: %w", ErrBadRequest, err))
		return
	}
	names, err := ParseRequest(line)
	if err != nil {
		s.refuse(c, err)
		return
	}
	w := bufio.NewWriter(c)
	_ = c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	for _, n := range s.src.Nodes(names) {
		_, _ = w.WriteString(FormatNode(n))
	}
	_, _ = w.WriteString("end\n")
	if err := w.Flush(); err != nil {
		s.log.Warn("cannot send the reply", "nodes", len(names), "error", err)
		return
	}
	if s.log.IsTrace() {
		s.log.Trace("answered", "nodes", len(names))
	}
}

func (s *Server) refuse(c net.Conn, err error) {
	s.log.Warn("refused a request", "error", err)
	_ = c.SetWriteDeadline(time.Now().Add(WriteTimeout))
	_, _ = io.WriteString(c, FormatError(err))
}

// errTooLong is a request line over the limit.
var errTooLong = errors.New("request line too long")

// readLine reads one line of at most limit bytes, without its newline.
func readLine(r *bufio.Reader, limit int) (string, error) {
	var buf []byte
	for {
		frag, err := r.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > limit+1 {
			return "", errTooLong
		}
		if err == nil {
			return string(buf[:len(buf)-1]), nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("connection closed before a newline: %w", err)
		}
		return "", err
	}
}

// Close stops accepting; connections being served finish on their own.
func (s *Server) Close() error { return s.srv.Close() } // a UnixListener also unlinks its socket

// Shutdown stops accepting and waits, until ctx ends, for the
// connections being served.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("topoapi: shutdown: %w", err)
	}
	return nil
}
