package sockserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// ErrClosed is Serve's result after Close, Shutdown or its context's end.
var ErrClosed = errors.New("server closed")

// Handler serves one connection and closes it. ctx is Serve's.
type Handler func(ctx context.Context, c net.Conn)

// Server runs one accept loop. Safe for concurrent use.
type Server struct {
	handle Handler
	sem    chan struct{}

	mu     sync.Mutex // guards ln, closed and the Adds of wg
	ln     net.Listener
	closed bool
	wg     sync.WaitGroup // connections being served
}

// New returns a server that serves at most maxConns connections at once
// (at least one) with handle.
func New(maxConns int, handle Handler) *Server {
	return &Server{handle: handle, sem: make(chan struct{}, max(1, maxConns))}
}

// Serve accepts on ln until ctx ends, Close or Shutdown; it then closes ln,
// waits for the connections being served and returns ErrClosed; any other
// accept error stops it too, wrapped.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.ln = ln
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	defer s.wg.Wait()
	for {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			_ = s.Close()
			return ErrClosed
		}
		c, err := ln.Accept()
		if err != nil {
			<-s.sem
			if s.isClosed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			_ = s.Close()
			return fmt.Errorf("accept: %w", err)
		}
		// Adds happen under mu while open, so that Shutdown's Wait never
		// races one; a connection accepted as Close ran is dropped (its
		// client sees EOF, as when the daemon is gone).
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			<-s.sem
			return ErrClosed
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			s.handle(ctx, c)
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops Serve and closes its listener (a UnixListener unlinks its
// socket unless told not to); connections being served go on. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.ln != nil {
		return s.ln.Close()
	}
	return nil
}

// Shutdown closes as Close does and waits until every connection being
// served is done or ctx ends (then ctx's error).
func (s *Server) Shutdown(ctx context.Context) error {
	_ = s.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }() // closed: no Add can race it
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
