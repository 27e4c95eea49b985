package flood_test

import (
	"context"
	"net"
	"testing"
	"time"

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
	s, err := limitsrv.New(context.Background(), mode, "127.0.0.1:0", "127.0.0.1:0", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func filledPool(t *testing.T, a auth.Authenticator, typ slurmproto.MsgType, n int) *flood.Pool {
	t.Helper()
	p := flood.NewPool(typ)
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
	want, _ := flood.WantFor(slurmproto.RequestPing)
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
	want, _ := flood.WantFor(slurmproto.RequestPing)
	frame := flood.RequestFrame(slurmproto.RequestPing, "MUNGE:x:")

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
	want, _ := flood.WantFor(slurmproto.RequestPing)
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
	want, _ := flood.WantFor(slurmproto.RequestPing)
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
	want, _ := flood.WantFor(slurmproto.RequestPing)
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
