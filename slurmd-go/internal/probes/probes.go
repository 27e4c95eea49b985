package probes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// LiveTimeout bounds /livez: the connect to the daemon's own RPC port
// and the wait for a worker.
const LiveTimeout = 2 * time.Second

// State is the registration state /readyz reports; the daemon's
// registration engine sets it. The zero value is "not registered yet".
type State struct {
	mu     sync.Mutex
	ok     bool
	reason string
}

// Registered records a registration slurmctld accepted.
func (s *State) Registered() { s.set(true, "") }

// Refused records a registration slurmctld answered with an error code.
func (s *State) Refused(rc string) { s.set(false, "registration refused by slurmctld: "+rc) }

// Failed records a registration that got no answer (slurmctld down,
// authentication failing).
func (s *State) Failed(err error) { s.set(false, "not registered: "+err.Error()) }

func (s *State) set(ok bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ok, s.reason = ok, reason
}

// Get returns whether the node is registered, and why not.
func (s *State) Get() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ok:
		return true, ""
	case s.reason == "":
		return false, "not registered with slurmctld yet"
	}
	return false, s.reason
}

// Handlers serves the probes.
type Handlers struct {
	State *State
	// ListenAddr is the RPC server's host:port; an unspecified host is
	// dialled on loopback.
	ListenAddr string
	// StepdPath is the step manager binary jobs start through.
	StepdPath string
	// Workers, if set, is the RPC server's worker probe (rpcserver
	// Listener.Probe): a no-op queued behind the waiting requests.
	Workers func(ctx context.Context) error
}

// Livez answers 200 while the RPC server accepts a connection (its event
// loop) and a worker takes a probe within LiveTimeout.
func (h Handlers) Livez(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), LiveTimeout)
	defer cancel()
	addr := dialAddr(h.ListenAddr)
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		http.Error(w, fmt.Sprintf("RPC server does not accept on %s: %v", addr, err), http.StatusServiceUnavailable)
		return
	}
	c.Close()
	if h.Workers != nil {
		if err := h.Workers(ctx); err != nil {
			http.Error(w, fmt.Sprintf("RPC workers do not answer: %v", err), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}

// Readyz answers 200 while the node is registered and can start steps.
func (h Handlers) Readyz(w http.ResponseWriter, _ *http.Request) {
	if ok, why := h.State.Get(); !ok {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	if st, err := os.Stat(h.StepdPath); err != nil || st.Mode()&0o111 == 0 {
		http.Error(w, fmt.Sprintf("step manager %s is not executable: %v", h.StepdPath, err), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
