package rpc

import (
	"context"
	"net/netip"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

var peer = netip.MustParseAddrPort("127.0.0.1:40000")

const slurmUID = 64030

// request builds a signed request frame (without its length prefix).
func request(t *testing.T, a auth.Authenticator, version uint16, body slurmproto.Body, kind auth.HashKind) []byte {
	t.Helper()
	b, err := slurmproto.EncodeBody(version, body)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := a.Encode(context.Background(), auth.Payload(version, uint16(body.MsgType()), b, kind), auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	h := slurmproto.Header{Version: version, MsgType: body.MsgType()}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, b)[4:]
}

// decodeReply checks the reply's signature and hash and returns it.
func decodeReply(t *testing.T, a auth.Authenticator, frame []byte) (*slurmproto.Message, auth.Credential, slurmproto.Body) {
	t.Helper()
	if frame == nil {
		t.Fatal("no reply")
	}
	msg, err := slurmproto.DecodeMessage(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	cred, err := a.Decode(context.Background(), msg.Auth.Cred)
	if err != nil {
		t.Fatalf("reply credential: %v", err)
	}
	if _, err := auth.CheckPayload(msg.Header.Version, uint16(msg.Header.MsgType), msg.Body, cred.Payload, auth.HashPolicy{}); err != nil {
		t.Fatalf("reply hash: %v", err)
	}
	body, err := slurmproto.DecodeBody(msg.Header.Version, msg.Header.MsgType, msg.Body)
	if err != nil {
		t.Fatal(err)
	}
	return msg, cred, body
}

func pingRoutes() Registry {
	return Registry{
		slurmproto.RequestPing: {Privileged: true, Handle: func(ctx context.Context, r *Request) (Reply, error) {
			return Reply{Body: slurmproto.PingSlurmdResponse{CPULoad: 7, FreeMem: 99}, Copy: true}, nil
		}},
		slurmproto.RequestDaemonStatus: {Handle: func(ctx context.Context, r *Request) (Reply, error) {
			return Reply{}, WithRC(slurmproto.ESlurmAccessDenied, nil)
		}},
		slurmproto.RequestReconfigure: {Privileged: true, NoReplyType: true, Handle: func(ctx context.Context, r *Request) (Reply, error) {
			return NoReply, nil
		}},
	}
}

func newDispatcher(a auth.Authenticator) *Dispatcher {
	return New(a, pingRoutes(), nil, Settings{SlurmUID: slurmUID}, hclog.NewNullLogger())
}

func rcOf(t *testing.T, b slurmproto.Body) uint32 {
	t.Helper()
	rc, ok := b.(*slurmproto.ReturnCode)
	if !ok {
		t.Fatalf("reply is %T, want RESPONSE_SLURM_RC", b)
	}
	return rc.RC
}

func TestDispatcher_Ping(t *testing.T) {
	for _, c := range []struct {
		name    string
		version uint16
	}{{"22.05 header", slurmproto.Version2205}, {"20.11 header from slurmctld", slurmproto.Version2011}} {
		t.Run(c.name, func(t *testing.T) {
			a := authtest.New(0, 0)
			d := newDispatcher(a)
			kind := auth.HashK12
			if c.version < slurmproto.Version2205 {
				kind = auth.HashNone
			}
			out := d.Serve(context.Background(), request(t, a, c.version, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, kind), peer)
			msg, cred, body := decodeReply(t, a, out)
			if msg.Header.Version != c.version {
				t.Fatalf("reply version 0x%x, want the request's 0x%x", msg.Header.Version, c.version)
			}
			p, ok := body.(*slurmproto.PingSlurmdResponse)
			if !ok || p.CPULoad != 7 || p.FreeMem != 99 {
				t.Fatalf("reply %#v", body)
			}
			// Ping replies are slurm_msg_t_copy replies: for the requester only.
			if cred.Payload == nil {
				t.Fatal("reply carries no hash")
			}
		})
	}
}

func TestDispatcher_Refusals(t *testing.T) {
	a := authtest.New(0, 0)
	d := newDispatcher(a)
	ctx := context.Background()

	t.Run("ordinary user ping gets ESLURM_USER_ID_MISSING", func(t *testing.T) {
		u := authtest.New(1000, 1000)
		u.SetDecoderUID(1000)
		// The refusal is signed for the requester alone.
		_, _, body := decodeReply(t, u, d.Serve(ctx, request(t, u, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12), peer))
		if rc := rcOf(t, body); rc != slurmproto.ESlurmUserIDMissing {
			t.Fatalf("rc %d", rc)
		}
	})
	t.Run("ordinary user reconfigure gets no reply", func(t *testing.T) {
		u := authtest.New(1000, 1000)
		if out := d.Serve(ctx, request(t, u, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestReconfigure}, auth.HashK12), peer); out != nil {
			t.Fatal("reconfigure answered")
		}
	})
	t.Run("unknown type gets EINVAL", func(t *testing.T) {
		_, _, body := decodeReply(t, a, d.Serve(ctx, request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestHealthCheck}, auth.HashK12), peer))
		if rc := rcOf(t, body); rc != slurmproto.EINVAL {
			t.Fatalf("rc %d", rc)
		}
	})
	t.Run("handler error is mapped at the edge", func(t *testing.T) {
		_, _, body := decodeReply(t, a, d.Serve(ctx, request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestDaemonStatus}, auth.HashK12), peer))
		if rc := rcOf(t, body); rc != slurmproto.ESlurmAccessDenied {
			t.Fatalf("rc %d", rc)
		}
	})
	t.Run("bad credential gets SLURM_PROTOCOL_AUTHENTICATION_ERROR", func(t *testing.T) {
		f := request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12)
		msg, _ := slurmproto.DecodeMessage(f)
		bad := slurmproto.EncodeMessage(msg.Header, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: "MUNGE:garbage:"}, msg.Body)[4:]
		_, _, body := decodeReply(t, a, d.Serve(ctx, bad, peer))
		if rc := rcOf(t, body); rc != slurmproto.SlurmProtocolAuthenticationError {
			t.Fatalf("rc %d", rc)
		}
	})
	t.Run("hash over another body gets ESLURM_PROTOCOL_INCOMPLETE_PACKET", func(t *testing.T) {
		cred, _ := a.Encode(ctx, auth.Payload(slurmproto.Version2205, uint16(slurmproto.RequestShutdown), []byte{0, 1}, auth.HashK12), auth.UIDAny)
		b, _ := slurmproto.EncodeBody(slurmproto.Version2205, slurmproto.ShutdownRequest{Options: 0})
		f := slurmproto.EncodeMessage(slurmproto.Header{Version: slurmproto.Version2205, MsgType: slurmproto.RequestShutdown},
			slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, b)[4:]
		_, _, body := decodeReply(t, a, d.Serve(ctx, f, peer))
		if rc := rcOf(t, body); rc != slurmproto.ESlurmProtocolIncompletePacket {
			t.Fatalf("rc %d", rc)
		}
	})
	t.Run("garbage frame gets an error reply, not silence", func(t *testing.T) {
		_, _, body := decodeReply(t, a, d.Serve(ctx, []byte{0x26, 0x00, 0xff}, peer))
		if rc := rcOf(t, body); rc != slurmproto.ESlurmProtocolIncompletePacket {
			t.Fatalf("rc %d", rc)
		}
	})
	t.Run("unsupported version gets SLURM_PROTOCOL_VERSION_ERROR", func(t *testing.T) {
		f := request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12)
		f[0], f[1] = 0x10, 0x00
		_, _, body := decodeReply(t, a, d.Serve(ctx, f, peer))
		if rc := rcOf(t, body); rc != slurmproto.SlurmProtocolVersionError {
			t.Fatalf("rc %d", rc)
		}
	})
}

func TestDispatcher_ReplayRefused(t *testing.T) {
	a := authtest.New(0, 0)
	a.SetReplay(true, false)
	d := newDispatcher(a)
	f := request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12)
	if _, _, body := decodeReply(t, a, d.Serve(context.Background(), f, peer)); body.MsgType() != slurmproto.ResponsePingSlurmd {
		t.Fatalf("first use refused: %#v", body)
	}
	_, _, body := decodeReply(t, a, d.Serve(context.Background(), f, peer))
	if rc := rcOf(t, body); rc != slurmproto.SlurmProtocolAuthenticationError {
		t.Fatalf("replay answered with %d", rc)
	}
}

// TestDispatcher_Releases: requests in every header version a controller
// sends are answered in that version; from 24.11's oldest (0x2700) on, a
// plain reply goes without a credential (SLURM_NO_AUTH_CRED, as 24.11's
// _resp_msg_setup), while a copy-style reply (ping) keeps a signed one.
func TestDispatcher_Releases(t *testing.T) {
	a := authtest.New(0, 0)
	d := newDispatcher(a)
	for _, v := range []uint16{slurmproto.Version2205, slurmproto.Version2302, slurmproto.Version2411, slurmproto.Version2511, slurmproto.Version2605} {
		out := d.Serve(context.Background(), request(t, a, v, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12), peer)
		msg, _, body := decodeReply(t, a, out)
		if msg.Header.Version != v || msg.Header.Flags&slurmproto.FlagNoAuthCred != 0 {
			t.Fatalf("ping at 0x%04x: reply header %+v", v, msg.Header)
		}
		if _, ok := body.(*slurmproto.PingSlurmdResponse); !ok {
			t.Fatalf("ping at 0x%04x: reply %T", v, body)
		}
		// REQUEST_DAEMON_STATUS's route answers an RC.
		out = d.Serve(context.Background(), request(t, a, v, &slurmproto.EmptyBody{Type: slurmproto.RequestDaemonStatus}, auth.HashK12), peer)
		m, err := slurmproto.DecodeMessage(out[4:])
		if err != nil {
			t.Fatal(err)
		}
		noAuth := m.Header.Flags&slurmproto.FlagNoAuthCred != 0
		if m.Header.Version != v || noAuth != (v >= slurmproto.Version2302) || (m.Auth.PluginID == 0) != noAuth {
			t.Fatalf("rc reply at 0x%04x: header %+v auth %d", v, m.Header, m.Auth.PluginID)
		}
		rc, err := slurmproto.DecodeBody(v, m.Header.MsgType, m.Body)
		if err != nil || rcOf(t, rc) != slurmproto.ESlurmAccessDenied {
			t.Fatalf("rc reply at 0x%04x: %v %v", v, rc, err)
		}
	}
	// A request without a credential is refused: it names no user.
	h := slurmproto.Header{Version: slurmproto.Version2411, Flags: slurmproto.FlagNoAuthCred, MsgType: slurmproto.RequestPing}
	out := d.Serve(context.Background(), slurmproto.EncodeMessage(h, slurmproto.AuthBlock{}, nil)[4:], peer)
	m, err := slurmproto.DecodeMessage(out[4:])
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if rcOf(t, rc) != auth.RCAuthenticationError {
		t.Fatalf("unauthenticated request: rc %v", rc)
	}
	// A body with layouts in other releases only is a version error.
	b, _ := slurmproto.EncodeBody(slurmproto.Version2605, slurmproto.NodeHealthCheck{Healthy: true})
	cred, _ := a.Encode(context.Background(), auth.Payload(slurmproto.Version2411, uint16(slurmproto.RequestNodeHealthCheck), b, auth.HashK12), auth.UIDAny)
	routes := pingRoutes()
	routes[slurmproto.RequestNodeHealthCheck] = Route{Handle: func(context.Context, *Request) (Reply, error) { return RC(0), nil }}
	d2 := New(a, routes, nil, Settings{SlurmUID: slurmUID}, hclog.NewNullLogger())
	h = slurmproto.Header{Version: slurmproto.Version2411, MsgType: slurmproto.RequestNodeHealthCheck}
	out = d2.Serve(context.Background(), slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, b)[4:], peer)
	m, _ = slurmproto.DecodeMessage(out[4:])
	rc, _ = slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if rcOf(t, rc) != slurmproto.SlurmProtocolVersionError {
		t.Fatalf("26.05-only body at 24.11: rc %v", rc)
	}
}
