package forward

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpcserver"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// node is one in-process daemon: the real server, dispatcher and forwarder.
type node struct {
	name string
	srv  rpcserver.Listener
}

// addrBook is slurm.conf's node addresses; the race detector does not see
// the network as an ordering, so it is locked.
type addrBook struct {
	mu sync.Mutex
	m  map[string]string
}

func (b *addrBook) set(n, a string) { b.mu.Lock(); b.m[n] = a; b.mu.Unlock() }
func (b *addrBook) get(n string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.m[n]
	return a, ok
}

func startNodes(t *testing.T, a auth.Authenticator, names []string, addrs *addrBook) {
	t.Helper()
	resolve := addrs.get
	for _, name := range names {
		name := name
		routes := rpc.Registry{slurmproto.RequestPing: {Privileged: true, Handle: func(ctx context.Context, r *rpc.Request) (rpc.Reply, error) {
			// Each node answers with its own marker so entries can be told apart.
			return rpc.Reply{Body: slurmproto.PingSlurmdResponse{CPULoad: uint32(len(name)), FreeMem: uint64(name[len(name)-1])}, Copy: true}, nil
		}}}
		fwd := New(Config{Resolve: resolve, TreeWidth: 2, MessageTimeout: 2 * time.Second}, hclog.NewNullLogger())
		d := rpc.New(a, routes, fwd, rpc.Settings{}, hclog.NewNullLogger())
		srv, err := rpcserver.New(rpcserver.Config{Addr: "tcp://127.0.0.1:0", ConnTimeout: 5 * time.Second, Logger: hclog.NewNullLogger()}, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
		addrs.set(name, srv.Addr().String())
	}
}

func TestForward_TreeCollectsEveryNode(t *testing.T) {
	a := authtest.New(0, 0)
	addrs := &addrBook{m: map[string]string{}}
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	startNodes(t, a, names, addrs)
	// n6 is in slurm.conf but nothing listens there.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addrs.set("n6", l.Addr().String())
	l.Close()

	body, _ := slurmproto.EncodeBody(slurmproto.Version2205, &slurmproto.EmptyBody{Type: slurmproto.RequestPing})
	cred, _ := a.Encode(context.Background(), auth.Payload(slurmproto.Version2205, uint16(slurmproto.RequestPing), body, auth.HashK12), auth.UIDAny)
	h := slurmproto.Header{
		Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing,
		Forward: slurmproto.Forward{Count: 5, Nodes: "n[2-6]", TimeoutMS: 2000, TreeWidth: 2},
	}
	frame := slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, body)
	n1, _ := addrs.get("n1")
	conn, err := net.Dial("tcp", n1)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	reply, err := slurmproto.ReadFrame(conn, 0)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := slurmproto.DecodeMessage(reply)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.MsgType != slurmproto.ResponsePingSlurmd {
		t.Fatalf("own reply %s", msg.Header.MsgType)
	}
	got := map[string]slurmproto.RetEntry{}
	for _, e := range msg.Header.RetList {
		got[e.NodeName] = e
	}
	if len(msg.Header.RetList) != 5 || len(got) != 5 {
		t.Fatalf("ret_list has %d entries for %d nodes: %+v", len(msg.Header.RetList), len(got), msg.Header.RetList)
	}
	for _, n := range []string{"n2", "n3", "n4", "n5"} {
		e := got[n]
		if e.Err != 0 || e.MsgType != slurmproto.ResponsePingSlurmd {
			t.Fatalf("%s: %+v", n, e)
		}
		b, err := slurmproto.DecodeBody(slurmproto.Version2205, e.MsgType, e.Body)
		if err != nil {
			t.Fatal(err)
		}
		if p := b.(*slurmproto.PingSlurmdResponse); p.FreeMem != uint64(n[1]) {
			t.Fatalf("%s answered as %c", n, rune(p.FreeMem))
		}
	}
	if e := got["n6"]; e.MsgType != slurmproto.ResponseForwardFailed || e.Err != slurmproto.SlurmCommunicationsConnectionError {
		t.Fatalf("dead node entry %+v", e)
	}
}

func TestForward_UnknownNode(t *testing.T) {
	f := New(Config{Resolve: func(string) (string, bool) { return "", false }, MessageTimeout: time.Second}, hclog.NewNullLogger())
	h := slurmproto.Header{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing,
		Forward: slurmproto.Forward{Count: 1, Nodes: "ghost"}}
	ret := f.Start(context.Background(), h, nil, slurmproto.Addr{}).Wait(context.Background())
	if len(ret) != 1 || ret[0].NodeName != "ghost" || ret[0].Err != slurmproto.SlurmUnknownForwardAddr || ret[0].MsgType != slurmproto.ResponseForwardFailed {
		t.Fatalf("%+v", ret)
	}
}
