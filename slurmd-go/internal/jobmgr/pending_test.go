package jobmgr

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeCtld answers every request RC 0, in the request's version (a 26.05
// controller), and hands the bodies to got, all but the REQUEST_PINGs the
// client negotiates the version with.
func fakeCtld(t *testing.T, a auth.Authenticator) (addr string, got <-chan slurmproto.Body) {
	t.Helper()
	return fakeCtldRC(t, a, nil)
}

// fakeCtldRC is fakeCtld whose answer to each request is rcFor's code (nil:
// always 0).
func fakeCtldRC(t *testing.T, a auth.Authenticator, rcFor func(slurmproto.Body) uint32) (addr string, got <-chan slurmproto.Body) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan slurmproto.Body, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				frame, err := slurmproto.ReadFrame(c, 0)
				if err != nil {
					return
				}
				msg, err := slurmproto.DecodeMessage(frame)
				if err != nil {
					return
				}
				body, err := slurmproto.DecodeBody(msg.Header.Version, msg.Header.MsgType, msg.Body)
				if err != nil {
					return
				}
				if msg.Header.MsgType != slurmproto.RequestPing {
					ch <- body
				}
				var rc uint32
				if rcFor != nil {
					rc = rcFor(body)
				}
				reply, _ := slurmproto.EncodeBody(msg.Header.Version, &slurmproto.ReturnCode{RC: rc})
				cred, _ := a.Encode(context.Background(), auth.Payload(msg.Header.Version, uint16(slurmproto.ResponseSlurmRC), reply, auth.HashK12), auth.UIDAny)
				h := slurmproto.Header{Version: msg.Header.Version, MsgType: slurmproto.ResponseSlurmRC}
				_, _ = c.Write(slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, reply))
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// TestPending_ResentAfterRestart: a REQUEST_COMPLETE_PROLOG still owed when
// the daemon died (its file in the spool dir) is sent by the next daemon's
// Recover, and its file is removed once slurmctld took it; an unreadable
// file is dropped.
func TestPending_ResentAfterRestart(t *testing.T) {
	spool := t.TempDir()
	a := authtest.New(0, 0)
	addr, got := fakeCtld(t, a)
	m := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	want := &slurmproto.CompleteProlog{JobID: 42, NodeName: "n2", PrologRC: 0}
	path := m.pendingPath("complete_prolog.42")
	if err := m.writePending(path, "REQUEST_COMPLETE_PROLOG", want); err != nil {
		t.Fatal(err)
	}
	junk := m.pendingPath("complete_prolog.43")
	if err := os.WriteFile(junk, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	m2 := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	cfg := m2.cfg()
	m2 = New(func() *config.Config { return cfg }, ctld.New(a, func() ctld.Config {
		return ctld.Config{Hosts: []string{addr}, MessageTimeout: 5 * time.Second}
	}, hclog.NewNullLogger()), a, func() int { return 1 }, "/nonexistent", nil, hclog.NewNullLogger())
	m2.Recover(context.Background(), false)
	select {
	case b := <-got:
		cp, ok := b.(*slurmproto.CompleteProlog)
		if !ok || cp.JobID != 42 || cp.NodeName != "n2" {
			t.Fatalf("slurmctld got %#v, want %#v", b, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owed REQUEST_COMPLETE_PROLOG was not resent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m2.Wait(ctx)
	for _, p := range []string{path, junk} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", filepath.Base(p), err)
		}
	}
}

// TestPending_DurableRetry: the file exists while the message is owed and
// is gone once slurmctld took it.
func TestPending_DurableRetry(t *testing.T) {
	spool := t.TempDir()
	a := authtest.New(0, 0)
	addr, got := fakeCtld(t, a)
	base := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	cfg := base.cfg()
	m := New(func() *config.Config { return cfg }, ctld.New(a, func() ctld.Config {
		return ctld.Config{Hosts: []string{addr}, MessageTimeout: 5 * time.Second}
	}, hclog.NewNullLogger()), a, func() int { return 1 }, "/nonexistent", nil, hclog.NewNullLogger())
	body := &slurmproto.CompleteProlog{JobID: 7, NodeName: "n2"}
	if err := m.durableRetry(context.Background(), "REQUEST_COMPLETE_PROLOG", "complete_prolog.7", body); err != nil {
		t.Fatal(err)
	}
	if b := <-got; b.(*slurmproto.CompleteProlog).JobID != 7 {
		t.Fatalf("got %#v", b)
	}
	if _, err := os.Stat(m.pendingPath("complete_prolog.7")); !os.IsNotExist(err) {
		t.Errorf("owed-message file left after slurmctld took it (%v)", err)
	}
}
