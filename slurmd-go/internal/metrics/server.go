package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultPort is the documented metrics port (README): what
// --metrics-addr without a value, or with a host only, listens on.
const DefaultPort = 9818

// DefaultAddr is where --metrics-addr without a value listens: loopback,
// so that nothing is exposed unless the admin names an address.
var DefaultAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort))

// Named timeouts of the HTTP server.
const (
	// ReadHeaderTimeout bounds a client's request headers (slowloris).
	ReadHeaderTimeout = 5 * time.Second
	// WriteTimeout bounds one response, a scrape included.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes kept-alive connections between scrapes.
	IdleTimeout = 2 * time.Minute
)

// ResolveAddr turns a --metrics-addr value into host:port: "on" is
// DefaultAddr; a bare port ("9818") listens on loopback; a bare host
// ("0.0.0.0") on DefaultPort; ":9818" on every interface, as for
// net.Listen. "" is off and stays "".
func ResolveAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return "", nil
	case "on":
		return DefaultAddr, nil
	}
	if p, err := strconv.Atoi(s); err == nil {
		if p <= 0 || p > 65535 {
			return "", fmt.Errorf("metrics: address %q: port out of range", s)
		}
		return net.JoinHostPort("127.0.0.1", s), nil
	}
	if !strings.Contains(s, ":") { // a host alone
		return net.JoinHostPort(s, strconv.Itoa(DefaultPort)), nil
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") { // an IPv6 host alone
		return net.JoinHostPort(s[1:len(s)-1], strconv.Itoa(DefaultPort)), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("metrics: address %q: %w", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("metrics: address %q: bad port %q", s, port)
	}
	return net.JoinHostPort(host, port), nil
}

// Server is the daemon's HTTP endpoint: /metrics, plus whatever handlers
// other packages add (the Kubernetes probes /healthz and /readyz).
type Server struct {
	addr string
	log  hclog.Logger
	mux  *http.ServeMux
	srv  *http.Server

	mu sync.Mutex   // guards ln
	ln net.Listener // nil until Start
}

// NewServer builds a server for addr (host:port, see ResolveAddr) that
// serves reg's metrics at /metrics. It does not listen until Start.
func NewServer(addr string, reg *prometheus.Registry, log hclog.Logger) *Server {
	log = log.Named("metrics")
	s := &Server{addr: addr, log: log, mux: http.NewServeMux()}
	s.mux.Handle("/metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          hclogAdapter{log},
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          reg,
		EnableOpenMetrics: true,
		Timeout:           WriteTimeout,
	})))
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: ReadHeaderTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	return s
}

// Handle adds a handler (e.g. /healthz); before Start. Any goroutine.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Start listens and serves in the background; it returns once the socket
// is bound (an address in use is the caller's fatal error).
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", s.addr, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server stopped", "error", err)
		}
	}()
	s.log.Info("serving metrics", "addr", ln.Addr().String())
	return nil
}

// Addr is the bound address (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops the server, letting scrapes in progress finish within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}

// hclogAdapter is promhttp's error logger.
type hclogAdapter struct{ log hclog.Logger }

func (a hclogAdapter) Println(v ...any) { a.log.Warn("scrape error", "error", fmt.Sprint(v...)) }
