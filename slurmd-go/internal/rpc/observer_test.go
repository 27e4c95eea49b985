package rpc

import (
	"context"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

type recorder struct{ got []Observation }

func (r *recorder) ObserveRPC(o Observation) { r.got = append(r.got, o) }

// TestDispatcher_Observer: every request is observed once, with its type,
// release and how it ended, the same outcomes the replies carry.
func TestDispatcher_Observer(t *testing.T) {
	a := authtest.New(0, 0)
	ctx := context.Background()
	user := authtest.New(1000, 1000)
	user.SetDecoderUID(1000)
	badCred := func() []byte {
		f := request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12)
		msg, _ := slurmproto.DecodeMessage(f)
		return slurmproto.EncodeMessage(msg.Header, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: "MUNGE:garbage:"}, msg.Body)[4:]
	}
	for _, c := range []struct {
		name  string
		frame func() []byte
		want  Observation
	}{
		{"ping served", func() []byte {
			return request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12)
		}, Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: ResultOK}},
		{"handler error code", func() []byte {
			return request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestDaemonStatus}, auth.HashK12)
		}, Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestDaemonStatus, Result: ResultError}},
		{"type not served", func() []byte {
			return request(t, a, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestHealthCheck}, auth.HashK12)
		}, Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestHealthCheck, Result: ResultUnsupported}},
		{"ordinary user's ping denied", func() []byte {
			return request(t, user, slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing}, auth.HashK12)
		}, Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: ResultDenied}},
		{"bad credential", badCred, Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: ResultAuth}},
		{"garbage frame", func() []byte { return []byte{0x26, 0x00, 0xff} }, Observation{Result: ResultMalformed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			d := newDispatcher(a)
			d.Observer = r
			d.Serve(ctx, c.frame(), peer)
			if len(r.got) != 1 {
				t.Fatalf("%d observations, want 1", len(r.got))
			}
			o := r.got[0]
			if o.Elapsed <= 0 {
				t.Errorf("elapsed %v, want > 0", o.Elapsed)
			}
			o.Elapsed = 0
			if o != c.want {
				t.Fatalf("observed %+v, want %+v", o, c.want)
			}
		})
	}
}
