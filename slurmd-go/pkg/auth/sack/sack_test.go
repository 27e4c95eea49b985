package sack_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/sack"
)

var _ sack.Service = (*authslurm.Auth)(nil)

// syncBuf is a log sink the test reads while the server writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type env struct {
	path string
	a    *authslurm.Auth
	logs *syncBuf
	c    *sack.Client
}

// newAuth is a real authslurm.Auth with a test key.
func newAuth(t *testing.T) *authslurm.Auth {
	t.Helper()
	keys, err := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte("sack test key")})
	if err != nil {
		t.Fatal(err)
	}
	ids := authslurm.ProcessIDs()
	a, err := authslurm.New(authslurm.Config{Keys: keys, ClusterName: "c", Hostname: "h", IDs: &ids})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// start runs a Server with a real authslurm.Auth on a socket in a temp dir.
func start(t *testing.T, version uint16, timeout time.Duration) *env {
	t.Helper()
	a := newAuth(t)
	logs := &syncBuf{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	path := filepath.Join(t.TempDir(), "run", "sack.socket")
	ln, err := sack.Listen(path, uint32(os.Getuid()), log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sack.NewServer(sack.ServerConfig{Service: a, Version: version, RequestTimeout: timeout, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &env{path: path, a: a, logs: logs, c: &sack.Client{Paths: []string{path}, Version: version}}
}

func TestServer_CreateVerify(t *testing.T) {
	for _, v := range []uint16{authslurm.Version2411, authslurm.Version2605} {
		e := start(t, v, 0)
		ctx := context.Background()
		hash := auth.Payload(v, 1008, nil, auth.HashK12)
		tok, err := e.c.Create(ctx, 0, hash)
		if err != nil {
			t.Fatal(err)
		}
		// Minted for this process's uid/gid (SO_PEERCRED), context sack.
		got, err := e.a.Verify(tok, 0, authslurm.ContextSACK)
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != uint32(os.Getuid()) || got.GID != uint32(os.Getgid()) || !bytes.Equal(got.Payload, hash) || got.RUID != 0 {
			t.Fatalf("token %+v", got)
		}
		if err := e.c.Verify(ctx, tok); err != nil {
			t.Fatalf("verify own token: %v", err)
		}
		// Restricted to another uid: this process may not verify it.
		other, err := e.c.Create(ctx, 4242, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.Verify(ctx, other); !errors.Is(err, sack.ErrRefused) {
			t.Fatalf("verify of another uid's token: %v", err)
		}
		// The answer to a bad token: 24.11 sends 0xffffffff, 26.05 closes.
		answer := rawRequest(t, e.path, sack.VerifyRequest(v, "not.a.token"))
		want := []byte{0xff, 0xff, 0xff, 0xff}
		if v >= authslurm.Version2605 {
			want = nil
		}
		if !bytes.Equal(answer, want) {
			t.Fatalf("version %#x: answer %x, want %x", v, answer, want)
		}
		if !strings.Contains(e.logs.String(), "credential verification failed") {
			t.Fatalf("no log line for the failed verify:\n%s", e.logs)
		}
	}
}

// rawRequest sends b and returns everything the server answers before it
// closes the connection.
func rawRequest(t *testing.T, path string, b []byte) []byte {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if len(b) > 0 {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

func TestServer_BadRequests(t *testing.T) {
	e := start(t, authslurm.Version2411, 300*time.Millisecond)
	be := binary.BigEndian
	hdr := func(version uint16, length, rpc uint32) []byte {
		b := be.AppendUint16(nil, version)
		b = be.AppendUint32(b, length)
		return be.AppendUint32(b, rpc)
	}
	verify := sack.VerifyRequest(0x2A00, "x.y.z")
	cases := []struct {
		name string
		req  []byte
		log  string
	}{
		{"unknown rpc", hdr(0x2A00, 8, 1008), "unexpected rpc:"},
		{"length shorter than its header", hdr(0x2A00, 4, sack.RPCCreate), "shorter than its own header"},
		{"length over the bound", hdr(0x2A00, sack.MaxRequest+1, sack.RPCCreate), "over 1048576"},
		{"CREATE without body", hdr(0x2A00, 8, sack.RPCCreate), "_sack_create: unable to unpack request"},
		{"CREATE data past the end", append(hdr(0x2A00, 16, sack.RPCCreate), 0, 0, 0, 0, 0, 0, 0, 9), "CREATE data of 9 bytes, 0 left"},
		{"VERIFY string without NUL", append(hdr(0x2A00, 13, sack.RPCVerify), 0, 0, 0, 1, 'x'), "string without its NUL"},
		{"VERIFY empty string", append(hdr(0x2A00, 12, sack.RPCVerify), 0, 0, 0, 0), "VERIFY without a token"},
		{"cut short", verify[:len(verify)-3], "incomplete message"},
		{"half a header", []byte{0x2a, 0, 0}, "connection closed before a whole header"},
		{"nothing sent", nil, "connection closed before a whole header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			if out := rawRequest(t, e.path, tc.req); len(out) != 0 {
				t.Fatalf("answer %x, want none", out)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("closed after %s, timeout is 300ms", d)
			}
			if !strings.Contains(e.logs.String(), tc.log) {
				t.Fatalf("no %q in the log:\n%s", tc.log, e.logs)
			}
			// The server goes on serving.
			if _, err := e.c.Create(context.Background(), auth.UIDAny, nil); err != nil {
				t.Fatalf("after %s: %v", tc.name, err)
			}
		})
	}
}

func TestListen_Socket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slurm")
	path := filepath.Join(dir, "sack.socket")
	ln, err := sack.Listen(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(dir)
	st, _ := os.Stat(path)
	if !fi.IsDir() || fi.Mode().Perm() != 0o755 || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o777 {
		t.Fatalf("dir %v socket %v", fi.Mode(), st.Mode())
	}
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("socket removed on close: %v", err)
	}
	// A socket already there (a previous daemon's) is replaced.
	ln, err = sack.Listen(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	// A directory owned by another non-root user is refused, as stock.
	if err := os.Chown(dir, 65534, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := sack.Listen(path, 0, nil); err == nil || !strings.Contains(err.Error(), "exists but is owned by 65534") {
		t.Fatalf("foreign dir: %v", err)
	}
	notDir := filepath.Join(t.TempDir(), "f")
	os.WriteFile(notDir, nil, 0o600)
	if _, err := sack.Listen(filepath.Join(notDir, "sack.socket"), 0, nil); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("file as dir: %v", err)
	}
}

func TestClient_Paths(t *testing.T) {
	e := start(t, authslurm.Version2605, 0)
	c := &sack.Client{Paths: []string{filepath.Join(t.TempDir(), "none.socket"), e.path}, Version: authslurm.Version2605}
	if _, err := c.Create(context.Background(), auth.UIDAny, []byte{1}); err != nil {
		t.Fatalf("fallback to the second path: %v", err)
	}
	c.Paths = c.Paths[:1]
	if _, err := c.Create(context.Background(), auth.UIDAny, nil); !errors.Is(err, sack.ErrNoSocket) || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("no socket: %v", err)
	}
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if p := sack.Paths2605("c1", get); strings.Join(p, " ") != "/run/slurm-c1/sack.socket /run/slurm/sack.socket /run/slurmctld/sack.socket /run/slurmdbd/sack.socket" {
		t.Fatal(p)
	}
	env[sack.EnvSocket] = "/x/s"
	if p := sack.Paths2605("c1", get); len(p) != 1 || p[0] != "/x/s" {
		t.Fatal(p)
	}
}

func TestWire_Requests(t *testing.T) {
	// Bytes as stock sack_create/sack_verify pack them.
	got := sack.CreateRequest(0x2A00, 4294967295, []byte{2, 0xaa})
	want := []byte{0x2a, 0, 0, 0, 0, 0x12, 0, 0, 0xfa, 0x01, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2, 2, 0xaa}
	if !bytes.Equal(got, want) {
		t.Fatalf("create %x\nwant   %x", got, want)
	}
	got = sack.VerifyRequest(0x2D00, "ab")
	want = []byte{0x2d, 0, 0, 0, 0, 0x0f, 0, 0, 0xfa, 0x02, 0, 0, 0, 3, 'a', 'b', 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("verify %x\nwant   %x", got, want)
	}
	h, err := sack.ParseHeader(got)
	if err != nil || h.RPC != sack.RPCVerify || h.BodyLen() != 7 {
		t.Fatal(h, err)
	}
	if tok, err := sack.ParseVerify(got[sack.HeaderLen:]); err != nil || tok != "ab" {
		t.Fatal(tok, err)
	}
}

// TestListen_Contended: node daemons of one host start at once and all take
// the one path and its directory; each Listen ends with its own socket
// bound (an unlink-then-bind died in a real cluster of "bind: address
// already in use").
func TestListen_Contended(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slurm", "sack.socket")
	const daemons, starts = 8, 20
	for range starts {
		start := make(chan struct{})
		errs := make(chan error, daemons)
		var wg sync.WaitGroup
		for range daemons {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ln, err := sack.Listen(path, uint32(os.Getuid()), nil)
				if err != nil {
					errs <- err
					return
				}
				ln.Close()
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// slowMint holds every MintSACK until release is closed.
type slowMint struct {
	*authslurm.Auth
	entered chan struct{}
	release chan struct{}
}

func (s slowMint) MintSACK(ctx context.Context, uid, gid, ruid uint32, data []byte) (string, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Auth.MintSACK(ctx, uid, gid, ruid, data)
}

// A daemon shutting down answers the requests it accepted and refuses new
// ones, which then go on to the next socket (slurmctld's).
func TestServer_ShutdownAnswersAccepted(t *testing.T) {
	a := newAuth(t)
	svc := slowMint{Auth: a, entered: make(chan struct{}, 1), release: make(chan struct{})}
	path := filepath.Join(t.TempDir(), "sack.socket")
	ln, err := sack.Listen(path, uint32(os.Getuid()), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sack.NewServer(sack.ServerConfig{Service: svc, Version: authslurm.Version2605})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()

	c := &sack.Client{Paths: []string{path}, Version: authslurm.Version2605}
	minted := make(chan error, 1)
	go func() {
		_, err := c.Create(context.Background(), 0, nil)
		minted <- err
	}()
	<-svc.entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	// Once the listener is closed a new client is refused at connect.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("unix", path)
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		if conn != nil {
			conn.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect during shutdown: %v, want ECONNREFUSED", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request still being served", err)
	default:
	}
	close(svc.release)
	if err := <-minted; err != nil {
		t.Fatalf("the request accepted before Shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}

	// Bounded by its context when a request never finishes.
	hung := slowMint{Auth: a, entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(hung.release)
	path2 := filepath.Join(t.TempDir(), "sack.socket")
	ln2, err := sack.Listen(path2, uint32(os.Getuid()), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv2, err := sack.NewServer(sack.ServerConfig{Service: hung})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv2.Serve(context.Background(), ln2) }()
	go func() { _, _ = (&sack.Client{Paths: []string{path2}}).Create(context.Background(), 0, nil) }()
	<-hung.entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := srv2.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a hung request: %v, want the deadline", err)
	}
}
