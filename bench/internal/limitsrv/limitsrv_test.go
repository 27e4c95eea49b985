package limitsrv_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/benchtest"
	"github.com/tiee-hpc/tiee/bench/internal/limitsrv"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

const rpcTimeout = 5 * time.Second

func start(t *testing.T, cfg limitsrv.Config) *limitsrv.Server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	s, err := limitsrv.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// ping sends one REQUEST_PING at 24.11 carrying tok (signed for payload) and returns the
// reply frame, or the error that ended the exchange.
func ping(t *testing.T, s *limitsrv.Server, tok string) (*slurmproto.Message, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr().String(), rpcTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rpcTimeout))
	h := slurmproto.Header{Version: slurmproto.Version2411, MsgType: slurmproto.RequestPing}
	if _, err := c.Write(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: tok}, nil)); err != nil {
		t.Fatal(err)
	}
	f, err := slurmproto.ReadFrame(c, 1<<20)
	if err != nil {
		return nil, err
	}
	return slurmproto.DecodeMessage(f)
}

func pingPayload(t slurmproto.MsgType) []byte {
	return auth.Payload(slurmproto.Version2411, uint16(t), nil, auth.HashK12)
}

// The auth/slurm limit server answers a valid token with a 24.11 RESPONSE_PING_SLURMD without
// auth block, and closes without answering a token of another key, an expired one, or one
// whose payload is not this message's hash, counting each as a failure.
func TestSlurm_VerifiesTokenAndHash(t *testing.T) {
	a := benchtest.SlurmAuth(t, nil)
	s := start(t, limitsrv.Config{Mode: limitsrv.ModeSlurm, Auth: a})
	ctx := context.Background()
	good, err := a.Encode(ctx, pingPayload(slurmproto.RequestPing), auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ping(t, s, good)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.MsgType != slurmproto.ResponsePingSlurmd || m.Header.Version != slurmproto.Version2411 ||
		m.Header.Flags&slurmproto.FlagNoAuthCred == 0 || m.Auth.PluginID != 0 {
		t.Fatalf("reply header %+v auth %+v", m.Header, m.Auth)
	}
	if _, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body); err != nil {
		t.Fatal(err)
	}

	other, _ := benchtest.SlurmAuth(t, nil).Encode(ctx, pingPayload(slurmproto.RequestPing), auth.UIDAny)
	old, _ := benchtest.SlurmAuth(t, func() time.Time { return time.Now().Add(-time.Hour) }).Encode(ctx, pingPayload(slurmproto.RequestPing), auth.UIDAny)
	wrongHash, _ := a.Encode(ctx, pingPayload(slurmproto.RequestDaemonStatus), auth.UIDAny)
	for name, tok := range map[string]string{"another key": other, "expired": old, "another message's hash": wrongHash, "not a token": "x"} {
		t.Run(name, func(t *testing.T) {
			before := s.Stats().Failures
			if m, err := ping(t, s, tok); !errors.Is(err, io.EOF) {
				t.Fatalf("reply %+v, error %v: want the connection closed without a reply", m, err)
			}
			if s.Stats().Failures != before+1 {
				t.Fatalf("failures %d, want %d", s.Stats().Failures, before+1)
			}
		})
	}
	// The server counts a reply once its write returned, which may be after
	// the client read it: wait for the count.
	st := s.Stats()
	for deadline := time.Now().Add(statsSettle); st.Requests != 1 && time.Now().Before(deadline); st = s.Stats() {
		time.Sleep(time.Millisecond)
	}
	if st.Requests != 1 || st.DecodeNS <= 0 || st.EncodeNS != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// statsSettle bounds the wait for a served request to show in Stats.
const statsSettle = 5 * time.Second

// At 24.11 the no-auth server's canned reply needs no credential; at 22.05 it is signed.
func TestNoAuth_CannedReplyPerRelease(t *testing.T) {
	s := start(t, limitsrv.Config{Mode: limitsrv.ModeNoAuth, Version: slurmproto.Version2411})
	m, err := ping(t, s, "anything")
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Version != slurmproto.Version2411 || m.Header.Flags&slurmproto.FlagNoAuthCred == 0 {
		t.Fatalf("24.11 canned reply header %+v", m.Header)
	}
	if _, err := limitsrv.New(context.Background(), limitsrv.Config{Mode: limitsrv.ModeNoAuth, Addr: "127.0.0.1:0"}); err == nil ||
		!strings.Contains(err.Error(), "signed") {
		t.Fatalf("22.05 canned reply without authenticator: %v", err)
	}
}

func TestNew_ModeNeedsItsPlugin(t *testing.T) {
	for _, c := range []struct {
		mode limitsrv.Mode
		a    auth.Authenticator
	}{
		{limitsrv.ModeSlurm, authtest.New(0, 0)},
		{limitsrv.ModeMunge, benchtest.SlurmAuth(t, nil)},
		{limitsrv.ModeSlurm, nil},
		{"jwt", benchtest.SlurmAuth(t, nil)},
	} {
		if s, err := limitsrv.New(context.Background(), limitsrv.Config{Mode: c.mode, Addr: "127.0.0.1:0", Auth: c.a}); err == nil {
			s.Close()
			t.Errorf("mode %s with %T: no error", c.mode, c.a)
		}
	}
}
