package flood_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/benchtest"
	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/limitsrv"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// waitFor polls cond every 10 ms for at most limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startLimit(t *testing.T, mode limitsrv.Mode, a auth.Authenticator) *limitsrv.Server {
	t.Helper()
	s, err := limitsrv.New(context.Background(), limitsrv.Config{Mode: mode, Addr: "127.0.0.1:0", StatsAddr: "127.0.0.1:0", Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func filledPool(t *testing.T, a auth.Authenticator, typ slurmproto.MsgType, n int) *flood.Pool {
	t.Helper()
	p := flood.NewPool(flood.Request2205(typ))
	st, err := p.Fill(context.Background(), a, n, 4)
	if err != nil || st.Made != n || p.Len() != n {
		t.Fatalf("Fill: made %d, len %d, err %v", st.Made, p.Len(), err)
	}
	return p
}

func TestPool_EachFrameOnce(t *testing.T) {
	a := authtest.New(0, 0)
	p := filledPool(t, a, slurmproto.RequestPing, 5)
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		f, ok := p.Next()
		if !ok {
			t.Fatalf("Next %d: empty", i)
		}
		if seen[string(f)] {
			t.Fatalf("frame %d handed out twice", i)
		}
		seen[string(f)] = true
		m, err := slurmproto.DecodeMessage(f[4:])
		if err != nil || m.Header.MsgType != slurmproto.RequestPing {
			t.Fatalf("frame %d: %v %v", i, m.Header.MsgType, err)
		}
		c, err := a.Decode(context.Background(), m.Auth.Cred)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := auth.CheckPayload(m.Header.Version, uint16(m.Header.MsgType), m.Body, c.Payload, auth.HashPolicy{}); err != nil {
			t.Fatalf("frame %d: body hash: %v", i, err)
		}
	}
	if _, ok := p.Next(); ok {
		t.Fatal("Next after the last frame: want empty")
	}
	if st, err := p.TopUp(context.Background(), a, 3, 2); err != nil || st.Made != 3 || p.Len() != 3 {
		t.Fatalf("TopUp: made %d len %d err %v", st.Made, p.Len(), err)
	}
	if st, _ := p.TopUp(context.Background(), a, 2, 2); st.Made != 0 {
		t.Fatalf("TopUp below Len made %d", st.Made)
	}
}

func reply(t *testing.T, typ slurmproto.MsgType, body slurmproto.Body, cred string) []byte {
	t.Helper()
	b, err := slurmproto.EncodeBody(slurmproto.Version2205, body)
	if err != nil {
		t.Fatal(err)
	}
	f := slurmproto.EncodeMessage(slurmproto.Header{Version: slurmproto.Version2205, MsgType: typ},
		slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, b)
	return f[4:]
}

func TestCheckReply_Kinds(t *testing.T) {
	want, _ := flood.WantFor(flood.Request2205(slurmproto.RequestPing))
	cases := []struct {
		name  string
		frame []byte
		kind  flood.ErrKind
	}{
		{"ping reply", reply(t, slurmproto.ResponsePingSlurmd, slurmproto.PingSlurmdResponse{CPULoad: 1}, "MUNGE:x:"), flood.OK},
		{"rc reply", reply(t, slurmproto.ResponseSlurmRC, slurmproto.ReturnCode{RC: 2010}, "MUNGE:x:"), flood.BadReplyRC},
		{"other type", reply(t, slurmproto.ResponseSlurmdStatus, slurmproto.SlurmdStatus{}, "MUNGE:x:"), flood.BadReplyType},
		{"no credential", reply(t, slurmproto.ResponsePingSlurmd, slurmproto.PingSlurmdResponse{}, ""), flood.BadReply},
		{"garbage", []byte{0x26, 0, 0}, flood.BadReply},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := flood.CheckReply(c.frame, want)
			if r.Kind != c.kind {
				t.Fatalf("kind %v (%v), want %v", r.Kind, r.Err, c.kind)
			}
			if c.kind.Protocol() != (c.kind == flood.BadReply || c.kind == flood.BadReplyRC || c.kind == flood.BadReplyType) {
				t.Fatal("Protocol() disagrees with the kinds")
			}
		})
	}
}

func TestRPC_TransportFailures(t *testing.T) {
	ctx := context.Background()
	want, _ := flood.WantFor(flood.Request2205(slurmproto.RequestPing))
	frame := flood.Request2205(slurmproto.RequestPing).Frame("MUNGE:x:")

	// A port nobody listens on.
	l, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	d, _ := flood.NewDialer(addr, 4)
	if r := flood.RPC(ctx, d, frame, want, time.Now().Add(2*time.Second)); r.Kind != flood.ConnectRefused {
		t.Errorf("closed port: %v (%v), want connect_refused", r.Kind, r.Err)
	}

	// A server that closes without answering, and one that never answers.
	for _, c := range []struct {
		name  string
		serve func(net.Conn)
		kind  flood.ErrKind
	}{
		{"closes", func(c net.Conn) { c.Read(make([]byte, 512)); c.Close() }, flood.ClosedNoReply},
		{"silent", func(c net.Conn) { time.Sleep(2 * time.Second); c.Close() }, flood.Timeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					go c.serve(conn)
				}
			}()
			d, _ := flood.NewDialer(l.Addr().String(), 4)
			r := flood.RPC(ctx, d, frame, want, time.Now().Add(300*time.Millisecond))
			if r.Kind != c.kind {
				t.Fatalf("%v (%v), want %v", r.Kind, r.Err, c.kind)
			}
		})
	}
}

func TestRunClosed_MungeLimitServer(t *testing.T) {
	a := authtest.New(0, 0)
	a.SetReplay(true, false) // as munged: a credential decodes once
	s := startLimit(t, limitsrv.ModeMunge, a)
	d, err := flood.NewDialer(s.Addr().String(), 8)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := flood.WantFor(flood.Request2205(slurmproto.RequestPing))
	pool := filledPool(t, a, slurmproto.RequestPing, 3000)
	st := flood.RunClosed(context.Background(), flood.Target{Dialer: d, Source: pool, Want: want},
		flood.ClosedConfig{VUs: 8, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond})
	if st.OK == 0 || st.ErrorTotal != 0 || st.Protocol != 0 {
		t.Fatalf("ok %d errors %v samples %v", st.OK, st.Errors, st.Samples)
	}
	if st.Latency.Count != st.OK || st.Latency.P50Ms <= 0 || st.Latency.P99Ms < st.Latency.P50Ms {
		t.Fatalf("latency summary %+v for %d ok", st.Latency, st.OK)
	}
	ls := s.Stats()
	if ls.Requests < st.OK || ls.Failures != 0 {
		t.Fatalf("server saw %d requests, %d failures; client counted %d ok", ls.Requests, ls.Failures, st.OK)
	}
	remote, err := limitsrv.FetchStats(s.StatsAddr().String())
	if err != nil || remote.Requests != ls.Requests {
		t.Fatalf("FetchStats %+v %v, want %d requests", remote, err, ls.Requests)
	}
}

func TestRunClosed_SourceExhausted(t *testing.T) {
	a := authtest.New(0, 0)
	s := startLimit(t, limitsrv.ModeNoAuth, a)
	d, _ := flood.NewDialer(s.Addr().String(), 1)
	want, _ := flood.WantFor(flood.Request2205(slurmproto.RequestPing))
	pool := filledPool(t, a, slurmproto.RequestPing, 20)
	st := flood.RunClosed(context.Background(), flood.Target{Dialer: d, Source: pool, Want: want},
		flood.ClosedConfig{VUs: 2, Duration: 10 * time.Second})
	if st.Extra["source_exhausted"] != 1 || st.OK != 20 || st.Window >= 10 {
		t.Fatalf("exhausted %v ok %d window %.2fs: want the run to stop after 20", st.Extra["source_exhausted"], st.OK, st.Window)
	}
}

func TestRunOpen_AndHold(t *testing.T) {
	a := authtest.New(0, 0)
	s := startLimit(t, limitsrv.ModeNoAuth, a)
	d, _ := flood.NewDialer(s.Addr().String(), 4)
	want, _ := flood.WantFor(flood.Request2205(slurmproto.RequestPing))
	pool := filledPool(t, a, slurmproto.RequestPing, 8)
	var frames [][]byte
	for f, ok := pool.Next(); ok; f, ok = pool.Next() {
		frames = append(frames, f)
	}
	h := flood.StartHold(context.Background(), d, 50, true)
	h.WaitRamp(5 * time.Second)
	waitFor(t, "50 held connections", 5*time.Second, func() bool { return s.Stats().OpenConns >= 50 })
	st := flood.RunOpen(context.Background(), flood.Target{Dialer: d, Source: flood.NewRecycled(frames), Want: want},
		flood.OpenConfig{Rate: 200, Duration: 250 * time.Millisecond})
	hs := h.Stats()
	h.Stop()
	if st.LatencyAll.Count == 0 || st.ErrorTotal != 0 {
		t.Fatalf("open loop: %d counted, errors %v", st.LatencyAll.Count, st.Errors)
	}
	if hs.Wanted != 50 || hs.Established != 50 {
		t.Fatalf("hold %+v", hs)
	}
	waitFor(t, "held connections closed", 5*time.Second, func() bool { return s.Stats().OpenConns == 0 })
}

func TestErrKind_Strings(t *testing.T) {
	var c flood.Counters
	c.Add(flood.Reset)
	c.Add(flood.BadReplyRC)
	c.Add(flood.OK)
	if got := c.Errors(); len(got) != 2 || got["reset"] != 1 || got["bad_reply_rc"] != 1 {
		t.Fatalf("Errors() = %v", got)
	}
	if c.ErrorTotal() != 2 || c.ProtocolErrors() != 1 {
		t.Fatalf("total %d protocol %d", c.ErrorTotal(), c.ProtocolErrors())
	}
}

func request2411(t slurmproto.MsgType) flood.Request {
	return flood.Request{Type: t, Version: slurmproto.Version2411, Plugin: slurmproto.AuthPluginSlurm}
}

// Every frame a Minter hands out is a 24.11 request with a token made for it (a clock that
// moves a second per token shows each is new: tokens made in the same second are identical,
// as stock's are, since they carry no nonce), which auth/slurm verifies and whose payload is
// the body hash of the message.
func TestMinter_FreshValidTokens(t *testing.T) {
	var ticks atomic.Int64
	start := time.Now().Add(-time.Minute)
	a := benchtest.SlurmAuth(t, func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Second / 2) })
	m := flood.NewMinter(request2411(slurmproto.RequestDaemonStatus), a)
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		f, ok := m.Next()
		if !ok {
			t.Fatalf("Next %d: %v", i, m.Err())
		}
		msg, err := slurmproto.DecodeMessage(f[4:])
		if err != nil {
			t.Fatal(err)
		}
		if msg.Header.Version != slurmproto.Version2411 || msg.Header.MsgType != slurmproto.RequestDaemonStatus ||
			msg.Auth.PluginID != slurmproto.AuthPluginSlurm || len(msg.Body) != 0 {
			t.Fatalf("frame %d: header %+v auth plugin %d", i, msg.Header, msg.Auth.PluginID)
		}
		seen[msg.Auth.Cred] = true
		cred, err := a.Decode(context.Background(), msg.Auth.Cred)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if _, err := auth.CheckPayload(msg.Header.Version, uint16(msg.Header.MsgType), msg.Body, cred.Payload, auth.HashPolicy{}); err != nil {
			t.Fatalf("frame %d: body hash: %v", i, err)
		}
	}
	// Two clock reads per frame (Next's mint, the check's Decode): a new second every frame.
	if m.Made() != 50 || m.Err() != nil || len(seen) != 50 {
		t.Fatalf("made %d, %d distinct tokens, err %v", m.Made(), len(seen), m.Err())
	}
}

type failingEncoder struct{}

func (failingEncoder) Encode(context.Context, []byte, uint32) (string, error) {
	return "", errors.New("no key")
}

func TestMinter_EncodeFailureEndsTheSource(t *testing.T) {
	m := flood.NewMinter(request2411(slurmproto.RequestPing), failingEncoder{})
	if _, ok := m.Next(); ok {
		t.Fatal("a failed encode handed out a frame")
	}
	if err := m.Err(); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("Err() = %v", err)
	}
}

// 24.11 replies carry no auth block (SLURM_NO_AUTH_CRED); a reply must come back at the
// request's version, and a header without auth block at 22.05 is a protocol error.
func TestCheckReply_2411(t *testing.T) {
	want, err := flood.WantFor(request2411(slurmproto.RequestPing))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := slurmproto.EncodeBody(slurmproto.Version2411, slurmproto.PingSlurmdResponse{CPULoad: 3})
	frame := func(version, flags uint16, a slurmproto.AuthBlock) []byte {
		h := slurmproto.Header{Version: version, Flags: flags, MsgType: slurmproto.ResponsePingSlurmd}
		return slurmproto.EncodeMessage(h, a, body)[4:]
	}
	slurmTok := slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: "a.b.c"}
	cases := []struct {
		name  string
		frame []byte
		kind  flood.ErrKind
	}{
		{"no auth block", frame(slurmproto.Version2411, slurmproto.FlagNoAuthCred, slurmproto.AuthBlock{}), flood.OK},
		{"signed with auth/slurm", frame(slurmproto.Version2411, 0, slurmTok), flood.OK},
		{"signed with munge", frame(slurmproto.Version2411, 0, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: "MUNGE:x:"}), flood.BadReply},
		{"22.05 header", frame(slurmproto.Version2205, 0, slurmTok), flood.BadReply},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := flood.CheckReply(c.frame, want); r.Kind != c.kind {
				t.Fatalf("kind %v (%v), want %v", r.Kind, r.Err, c.kind)
			}
		})
	}
	w2205, _ := flood.WantFor(flood.Request2205(slurmproto.RequestPing))
	b2205, _ := slurmproto.EncodeBody(slurmproto.Version2205, slurmproto.PingSlurmdResponse{})
	h := slurmproto.Header{Version: slurmproto.Version2205, Flags: slurmproto.FlagNoAuthCred, MsgType: slurmproto.ResponsePingSlurmd}
	if r := flood.CheckReply(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{}, b2205)[4:], w2205); r.Kind != flood.BadReply {
		t.Fatalf("22.05 reply without auth block: %v (%v), want bad_reply", r.Kind, r.Err)
	}
}

// The auth/slurm limit server verifies every fresh token and answers at 24.11 without an auth
// block, which the client accepts.
func TestRunClosed_SlurmLimitServer(t *testing.T) {
	a := benchtest.SlurmAuth(t, nil)
	s, err := limitsrv.New(context.Background(), limitsrv.Config{Mode: limitsrv.ModeSlurm, Addr: "127.0.0.1:0", StatsAddr: "127.0.0.1:0", Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	d, _ := flood.NewDialer(s.Addr().String(), 1)
	req := request2411(slurmproto.RequestPing)
	want, _ := flood.WantFor(req)
	m := flood.NewMinter(req, a)
	st := flood.RunClosed(context.Background(), flood.Target{Dialer: d, Source: m, Want: want},
		flood.ClosedConfig{VUs: 4, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond})
	if st.OK == 0 || st.ErrorTotal != 0 {
		t.Fatalf("ok %d errors %v samples %v", st.OK, st.Errors, st.Samples)
	}
	ls := s.Stats()
	if ls.Requests < st.OK || ls.Failures != 0 || ls.DecodeNS <= 0 || ls.EncodeNS != 0 {
		t.Fatalf("server stats %+v for %d ok", ls, st.OK)
	}
	if m.Made() < st.OK {
		t.Fatalf("minted %d tokens for %d RPCs", m.Made(), st.OK)
	}
}
