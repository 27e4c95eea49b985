//go:build integration

package authslurm_test

// Interop with the real releases (the chroots of scripts/chroots.sh; a
// missing chroot fails the test):
//
//	go test -tags integration -count=1 -v -run Interop ./slurmd-go/pkg/auth/authslurm/
//
// Per release, one cluster (real slurmctld + stock slurmd n1, auth/slurm):
//
//	(a) our sack.Server at the clients' /run/slurm/sack.socket: real sinfo,
//	    scontrol ping and srun (root and nobody) take their tokens from it
//	    and the real slurmctld and slurmd accept them; with a wrong key they
//	    are refused;
//	(b) a REQUEST_PING framed here with a token from Auth.Encode is
//	    answered SLURM_SUCCESS by the real slurmctld;
//	(c) bad tokens sent to the live stock slurmd: stockAnswers records what
//	    it answers and logs (slurmd-go must do the same), and it keeps
//	    serving.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/sack"
)

// Message types and codes (slurm_protocol_defs.h, slurm_errno.h).
const (
	requestPing        = 1008
	responseSlurmRC    = 8001
	flagNoAuthCred     = 0x0040
	responsePingSlurmd = 1016
	rcUserIDMissing    = 2010 // ESLURM_USER_ID_MISSING
	rcIncompletePacket = 5003 // ESLURM_PROTOCOL_INCOMPLETE_PACKET
	rcAuthError        = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
)

// logWait bounds the wait for a daemon's log line about a request.
const logWait = 20 * time.Second

// countingService is the real Auth with a record of who asked.
type countingService struct {
	*authslurm.Auth
	mu               sync.Mutex
	creates          map[uint32]int // peer uid -> CREATEs
	verifies, failed int            // VERIFYs, and those refused
}

func (s *countingService) VerifySACK(ctx context.Context, token string, uid uint32) error {
	err := s.Auth.VerifySACK(ctx, token, uid)
	s.mu.Lock()
	s.verifies++
	if err != nil {
		s.failed++
	}
	s.mu.Unlock()
	return err
}

func (s *countingService) MintSACK(ctx context.Context, uid, gid, ruid uint32, data []byte) (string, error) {
	s.mu.Lock()
	s.creates[uid]++
	s.mu.Unlock()
	return s.Auth.MintSACK(ctx, uid, gid, ruid, data)
}

func (s *countingService) count(uid uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates[uid]
}

// clusterAuth is an Auth with the cluster's key, loaded as a daemon does.
func clusterAuth(t *testing.T, c *stockCluster, mod func(*authslurm.Config)) *authslurm.Auth {
	t.Helper()
	key, jwks := authslurm.KeyPaths(c.confPath(), func(string) string { return "" })
	keys, warnings, err := authslurm.LoadKeys(authslurm.LoadOptions{KeyFile: key, JWKSFile: jwks})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("LoadKeys: %v %v", err, warnings)
	}
	rel := c.rel
	cfg := authslurm.Config{Keys: keys, ClusterName: c.name, Version: func() uint16 { return rel.version }}
	if mod != nil {
		mod(&cfg)
	}
	a, err := authslurm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// serveSACK runs a sack.Server for svc at the clients' /run/slurm.
func serveSACK(t *testing.T, c *stockCluster, svc sack.Service) (stop func()) {
	t.Helper()
	ln, err := sack.Listen(filepath.Join(c.sackDir, "sack.socket"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sack.NewServer(sack.ServerConfig{Service: svc, Version: c.rel.version})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sack Serve: %v", err)
		}
	}
}

func TestInterop_2411(t *testing.T) { interop(t, releases[0]) }
func TestInterop_2605(t *testing.T) { interop(t, releases[1]) }

func interop(t *testing.T, rel release) {
	c := newStockCluster(t, rel, true, "")
	svc := &countingService{Auth: clusterAuth(t, c, nil), creates: map[uint32]int{}}
	stop := serveSACK(t, c, svc)

	t.Run("a_real_clients_use_our_SACK", func(t *testing.T) {
		waitFor(t, daemonUp, "node n1 idle in sinfo", func() bool {
			out, err := c.runClient(nil, "sinfo", "-h", "-o", "%T", "-n", "n1")
			return err == nil && strings.TrimSpace(out) == "idle"
		})
		out, err := c.runClient(nil, "scontrol", "ping")
		if err != nil || !strings.Contains(out, "is UP") {
			t.Fatalf("scontrol ping: %v\n%s", err, out)
		}
		out, err = c.runClient(nil, "srun", "-N1", "/bin/echo", "interop")
		if err != nil || strings.TrimSpace(out) != "interop" {
			t.Fatalf("srun as root: %v\n%s", err, out)
		}
		nobody := [2]int{65534, 65534}
		out, err = c.runClient(&nobody, "srun", "-N1", "/usr/bin/id", "-u")
		if err != nil || strings.TrimSpace(out) != "65534" {
			t.Fatalf("srun as nobody: %v\n%s", err, out)
		}
		if svc.count(0) == 0 || svc.count(65534) == 0 {
			t.Fatalf("our SACK minted %d tokens for root, %d for nobody", svc.count(0), svc.count(65534))
		}
		// srun checks the tokens of the messages slurmstepd sends it (task
		// exits, launch answers) with a VERIFY to the same socket.
		svc.mu.Lock()
		verifies, failed := svc.verifies, svc.failed
		svc.mu.Unlock()
		if verifies == 0 || failed != 0 {
			t.Fatalf("our SACK server verified %d tokens, refused %d", verifies, failed)
		}
		t.Logf("our SACK server minted %d tokens for root, %d for nobody, verified %d", svc.count(0), svc.count(65534), verifies)
	})

	t.Run("a_wrong_key_is_refused", func(t *testing.T) {
		stop()
		wrong, err := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte("not the cluster's key")})
		if err != nil {
			t.Fatal(err)
		}
		bad := clusterAuth(t, c, func(cfg *authslurm.Config) { cfg.Keys = wrong })
		stop = serveSACK(t, c, bad)
		ctldLog := filepath.Join(c.dir, "slurmctld.log")
		off := fileSize(t, ctldLog)
		out, err := c.runClient(nil, "scontrol", "ping")
		if err == nil || strings.Contains(out, "is UP") {
			t.Fatalf("scontrol ping with tokens of another key: %v\n%s", err, out)
		}
		waitFor(t, daemonUp, "slurmctld's log line", func() bool {
			return strings.Contains(logSince(t, ctldLog, off), "auth_g_verify")
		})
		t.Logf("scontrol: %s\nslurmctld: %s", strings.TrimSpace(out), grepLines(logSince(t, ctldLog, off), "auth"))
	})
	stop()

	a := clusterAuth(t, c, func(cfg *authslurm.Config) { cfg.IDs = &authslurm.IDs{UID: 0, GID: 0, VerifierUID: 0} })
	t.Run("b_Encode_accepted_by_slurmctld", func(t *testing.T) {
		versions := []uint16{authslurm.Version2411}
		if rel.version != authslurm.Version2411 {
			versions = append(versions, rel.version)
		}
		for _, v := range versions {
			payload := auth.Payload(v, requestPing, nil, auth.HashK12)
			tok, err := a.Encode(context.Background(), payload, 0) // to SlurmUser
			if err != nil {
				t.Fatal(err)
			}
			r := sendRPC(t, c.ctldPort, frame(v, 0, requestPing, tok, nil))
			if r.closed || r.msgType != responseSlurmRC || r.rc != 0 {
				t.Fatalf("version %#x: slurmctld answered %+v", v, r)
			}
			t.Logf("version %#x: slurmctld answered %+v", v, r)
		}
	})

	t.Run("c_bad_tokens_to_stock_slurmd", func(t *testing.T) {
		stockAnswers(t, c, a)
	})
}

// stockAnswer is what a stock slurmd did with one request.
type stockAnswer struct {
	closed  bool   // no answer: the connection is closed
	msgType uint16 // else the answer's type
	rc      uint32 // and its return code (RESPONSE_SLURM_RC)
	log     string // a line stock logs for it ("" for none)
}

// stockCase is one REQUEST_PING sent to a live stock slurmd and what each
// release did with it (measured; slurmd-go must do the same).
type stockCase struct {
	name  string
	frame func(t *testing.T, v uint16) []byte
	want  map[string]stockAnswer // by release
}

// Answers of stock slurmd 24.11.5 and 26.05.5.
var (
	pingOK        = stockAnswer{msgType: responsePingSlurmd, log: "Processing RPC: REQUEST_PING"}
	closed2411    = func(log string) stockAnswer { return stockAnswer{closed: true, log: log} }
	authError2605 = func(log string) stockAnswer {
		return stockAnswer{msgType: responseSlurmRC, rc: rcAuthError, log: log}
	}
)

func stockAnswers(t *testing.T, c *stockCluster, good *authslurm.Auth) {
	ctx := context.Background()
	v := c.rel.version
	mk := func(a *authslurm.Auth, ctxName string, payloadBody []byte, ruid uint32, uid uint32) func(*testing.T, uint16) []byte {
		return func(t *testing.T, v uint16) []byte {
			p := auth.Payload(v, requestPing, payloadBody, auth.HashK12)
			tok, err := a.Mint(ctxName, uid, uid, ruid, p, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			return frame(v, 0, requestPing, tok, nil)
		}
	}
	with := func(mod func(*authslurm.Config)) *authslurm.Auth { return clusterAuth(t, c, mod) }
	wrongKey, _ := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte("forged")})
	past := time.Now().Add(-2 * time.Minute)
	both := func(a stockAnswer) map[string]stockAnswer { return map[string]stockAnswer{"24.11": a, "26.05": a} }
	authFail := func(log2411, log2605 string) map[string]stockAnswer {
		return map[string]stockAnswer{"24.11": closed2411(log2411), "26.05": authError2605(log2605)}
	}
	cases := []stockCase{
		{"valid", mk(good, "auth", nil, 0, 0), both(pingOK)},
		{"forged signature", mk(with(func(cf *authslurm.Config) { cf.Keys = wrongKey }), "auth", nil, 0, 0),
			authFail("decode_jwt: jwt_decode (with key) failure: Invalid argument", "decode_jwt: jwt_decode (with key) failure: Invalid argument")},
		{"expired", mk(with(func(cf *authslurm.Config) { cf.Now = func() time.Time { return past } }), "auth", nil, 0, 0),
			authFail("decode_jwt: token expired at", "decode_jwt: token expired at")},
		{"ruid of another user", mk(good, "auth", nil, 1234, 0),
			authFail("asked to verify token with r_uid=1234 for uid=0, rejecting", "asked to verify token with r_uid=1234 for uid=0, rejecting")},
		{"body hash of another body", mk(good, "auth", []byte{1, 2, 3, 4}, 0, 0),
			both(stockAnswer{msgType: responseSlurmRC, rc: rcIncompletePacket, log: "failed: Header lengths are longer than data received"})},
		{"another cluster", mk(with(func(cf *authslurm.Config) { cf.ClusterName = "elsewhere" }), "auth", nil, 0, 0), both(pingOK)},
		{"launch context", mk(good, "launch", nil, 0, 0),
			authFail("auth_g_verify: REQUEST_PING has authentication error", "auth_g_verify: REQUEST_PING has authentication error")},
		{"sack context", mk(good, "sack", nil, 0, 0), both(pingOK)},
		{"ordinary user", mk(good, "sack", nil, 0, 65534), map[string]stockAnswer{
			"24.11": {msgType: responseSlurmRC, rc: rcUserIDMissing, log: "Security violation, ping RPC from uid 65534"},
			"26.05": {msgType: responseSlurmRC, rc: rcUserIDMissing, log: "Security violation: REQUEST_PING req from uid 65534"}}},
		{"garbage token", func(t *testing.T, v uint16) []byte { return frame(v, 0, requestPing, "garbage", nil) },
			authFail("decode_jwt: jwt_decode (with key) failure: Invalid argument", "decode_jwt: jwt_decode (with key) failure: Invalid argument")},
		{"alg none", func(t *testing.T, v uint16) []byte {
			tok, _ := good.Encode(ctx, auth.Payload(v, requestPing, nil, auth.HashK12), 0)
			parts := strings.Split(tok, ".")
			return frame(v, 0, requestPing, "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0."+parts[1]+".", nil)
		}, authFail("decode_jwt: jwt_decode (with key) failure: Invalid argument", "decode_jwt: jwt_decode (with key) failure: Invalid argument")},
		{"no auth block (SLURM_NO_AUTH_CRED)", func(t *testing.T, v uint16) []byte { return frame(v, flagNoAuthCred, requestPing, "", nil) },
			map[string]stockAnswer{"24.11": closed2411("slurmd_req: received message without previously validated auth"),
				// 26.05's _on_msg answers every request without validated
				// auth with SLURM_PROTOCOL_AUTHENTICATION_ERROR, logging nothing.
				"26.05": {msgType: responseSlurmRC, rc: rcAuthError}}},
	}
	slurmdLog := filepath.Join(c.dir, "n1.log")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want[c.rel.name]
			off := fileSize(t, slurmdLog)
			r := sendRPC(t, c.slurmdPort, tc.frame(t, v))
			t.Logf("answer %+v", r)
			if r.closed != want.closed || !want.closed && (r.msgType != want.msgType || r.rc != want.rc) {
				t.Errorf("stock slurmd answered %+v, recorded %+v", r, want)
			}
			// The answer (or the close) comes after slurmd's log line, but
			// the log is written asynchronously: wait for the line.
			if want.log == "" {
				return
			}
			var logged string
			defer func() { t.Logf("slurmd logged:\n%s", grepLines(logged, "error", "REQUEST_PING")) }()
			waitFor(t, logWait, fmt.Sprintf("slurmd's log line %q", want.log), func() bool {
				logged = logSince(t, slurmdLog, off)
				return strings.Contains(logged, want.log)
			})
		})
	}
	// Still serving.
	r := sendRPC(t, c.slurmdPort, cases[0].frame(t, v))
	if r.closed || r.msgType != responsePingSlurmd {
		t.Fatalf("after the bad tokens: %+v", r)
	}
}

// frame is a whole >= 0x2A00 request: u32 length, header (no forward, no
// ret list, AF_UNSPEC orig_addr), the auth block (u32 103, packstr(token))
// unless flags has SLURM_NO_AUTH_CRED, body.
func frame(version, flags, msgType uint16, token string, body []byte) []byte {
	be := binary.BigEndian
	b := be.AppendUint32(nil, 0)
	b = be.AppendUint16(b, version)
	b = be.AppendUint16(b, flags)
	b = be.AppendUint16(b, msgType)
	b = be.AppendUint32(b, uint32(len(body)))
	b = be.AppendUint16(b, 0) // forward.cnt
	b = be.AppendUint16(b, 0) // ret_cnt
	b = be.AppendUint16(b, 0) // orig_addr: AF_UNSPEC
	if flags&flagNoAuthCred == 0 {
		b = be.AppendUint32(b, authslurm.PluginID)
		b = be.AppendUint32(b, uint32(len(token)+1))
		b = append(append(b, token...), 0)
	}
	b = append(b, body...)
	be.PutUint32(b, uint32(len(b)-4))
	return b
}

// reply is what a daemon answered to one request.
type reply struct {
	closed  bool   // closed without an answer
	version uint16 // of the answer's header
	flags   uint16
	msgType uint16
	rc      uint32 // RESPONSE_SLURM_RC's return code
	bodyLen int
}

// sendRPC sends one framed request to 127.0.0.1:port and reads the answer.
func sendRPC(t *testing.T, port int, req []byte) reply {
	t.Helper()
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), rpcDeadline)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(rpcDeadline))
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
			return reply{closed: true}
		}
		t.Fatalf("read answer: %v", err)
	}
	msg := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(conn, msg); err != nil {
		t.Fatalf("read answer body: %v", err)
	}
	be := binary.BigEndian
	r := reply{version: be.Uint16(msg), flags: be.Uint16(msg[2:]), msgType: be.Uint16(msg[4:]), bodyLen: int(be.Uint32(msg[6:]))}
	p := msg[10:]
	if be.Uint16(p) != 0 || be.Uint16(p[2:]) != 0 {
		t.Fatalf("answer with forward/ret list: %x", msg)
	}
	p = p[4:]
	switch be.Uint16(p) {
	case 0:
		p = p[2:]
	case 2:
		p = p[8:]
	default:
		t.Fatalf("answer orig_addr family %d", be.Uint16(p))
	}
	if r.flags&flagNoAuthCred == 0 {
		l := be.Uint32(p[4:])
		p = p[8+l:]
	}
	if r.msgType == responseSlurmRC && len(p) >= 4 {
		r.rc = be.Uint32(p)
	}
	return r
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// grepLines keeps the lines of s that contain any of words.
func grepLines(s string, words ...string) string {
	var out bytes.Buffer
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out.WriteString("    " + l + "\n")
				break
			}
		}
	}
	return out.String()
}
