//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// tokenLogWait bounds the wait for the node's log line about a refused token.
const tokenLogWait = 10 * time.Second

// tokenAnswer is what a node daemon did with one request.
type tokenAnswer struct {
	closed  bool // no answer: the connection was closed
	msgType slurmproto.MsgType
	rc      uint32 // RESPONSE_SLURM_RC's code
}

func (a tokenAnswer) String() string {
	switch {
	case a.closed:
		return "closed without an answer"
	case a.msgType == slurmproto.ResponseSlurmRC:
		return fmt.Sprintf("RESPONSE_SLURM_RC %s (%d)", slurmproto.RCName(a.rc), a.rc)
	}
	return a.msgType.String()
}

func answerOf(t *testing.T, m *slurmproto.Message) tokenAnswer {
	t.Helper()
	if m == nil {
		return tokenAnswer{closed: true}
	}
	a := tokenAnswer{msgType: m.Header.MsgType}
	if a.msgType == slurmproto.ResponseSlurmRC {
		a.rc = replyRC(t, m)
	}
	return a
}

// TestBadInput_Tokens sends REQUEST_PING with bad auth/slurm tokens (forged signature,
// expired, for another uid, over another body, minted for a job credential, garbage,
// alg "none", no auth block at all), and some odd but sound ones (another cluster's
// name, a SACK token, an ordinary user's), to a live node of an auth/slurm cluster of
// the stock daemon and of slurmd-go, both of the run's release (24.11 or 26.05, with
// TIEE_AUTH=slurm or munge alike: the pair is auth/slurm; a 22.05 run, whose release
// has no auth/slurm, checks 24.11). slurmd-go must answer each
// as the stock daemon does. Where stock closes the connection without a word (24.11
// for an authentication failure: its auth_uid is unset and slurmd_req drops it)
// slurmd-go answers SLURM_PROTOCOL_AUTHENTICATION_ERROR, the code 26.05 answers; its
// log names the cause; both nodes still serve and stay idle.
func TestBadInput_Tokens(t *testing.T) {
	rel, err := cluster.SelectedRelease()
	if err != nil {
		t.Fatal(err)
	}
	if !rel.AuthSlurm {
		// 22.05 has no auth/slurm (23.11 brought it): its run checks 24.11's.
		rel, err = cluster.LookupRelease("24.11")
		if err != nil {
			t.Fatal(err)
		}
	}
	p := startPair(t, func(impl string) cluster.Options {
		return cluster.Options{Impl: impl, Release: rel.Name, Nodes: 1, Auth: cluster.AuthSlurm}
	})
	v := p.sut.ProtocolVersion
	ping := uint16(slurmproto.RequestPing)
	peer := map[*cluster.Cluster]rawPeer{p.ref: newRawPeer(t, p.ref), p.sut: newRawPeer(t, p.sut)}
	uid, gid, err := cluster.LookupUser(cluster.TestUser)
	if err != nil {
		t.Fatal(err)
	}
	payload := func(body []byte) []byte { return auth.Payload(v, ping, body, auth.HashK12) }
	// mint makes a ping with a token of c's key (mod: another key or clock).
	type minter func(t *testing.T, c *cluster.Cluster) []byte
	mint := func(mod func(*authslurm.Config), ctxName string, uid, gid, ruid uint32, body []byte) minter {
		return func(t *testing.T, c *cluster.Cluster) []byte {
			tok, err := tokenSigner(t, c, mod).Mint(ctxName, uid, gid, ruid, payload(body), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			return slurmproto.EncodeMessage(slurmproto.Header{Version: v, MsgType: slurmproto.RequestPing},
				slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: tok}, nil)
		}
	}
	raw := func(flags uint16, tok string) minter {
		return func(t *testing.T, c *cluster.Cluster) []byte {
			return slurmproto.EncodeMessage(slurmproto.Header{Version: v, Flags: flags, MsgType: slurmproto.RequestPing},
				slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: tok}, nil)
		}
	}
	otherKey := func(cf *authslurm.Config) {
		keys, err := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte("not this cluster's key")})
		if err != nil {
			t.Fatal(err)
		}
		cf.Keys = keys
	}
	past := func(cf *authslurm.Config) { cf.Now = func() time.Time { return time.Now().Add(-2 * time.Minute) } }
	elsewhere := func(cf *authslurm.Config) { cf.ClusterName = "elsewhere" }
	algNone := func(t *testing.T, c *cluster.Cluster) []byte {
		tok, err := tokenSigner(t, c, nil).Encode(context.Background(), payload(nil), auth.UIDAny)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(tok, ".")
		return raw(0, "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0."+parts[1]+".")(t, c)
	}
	pong := tokenAnswer{msgType: slurmproto.ResponsePingSlurmd}
	const anyUID = auth.UIDAny
	for _, tc := range []struct {
		name  string
		frame minter
		// cause is a part of slurmd-go's log line for a refusal ("" for an answer).
		cause string
	}{
		{"valid", mint(nil, authslurm.ContextAuth, 0, 0, anyUID, nil), ""},
		{"forged signature", mint(otherKey, authslurm.ContextAuth, 0, 0, anyUID, nil), "jwt_decode (with key) failure"},
		{"expired", mint(past, authslurm.ContextAuth, 0, 0, anyUID, nil), "token expired at"},
		{"ruid of another user", mint(nil, authslurm.ContextAuth, 0, 0, 1234, nil), "asked to verify token with r_uid=1234"},
		{"body hash of another body", mint(nil, authslurm.ContextAuth, 0, 0, anyUID, []byte{1, 2, 3, 4}), "message hash check failed"},
		{"another cluster", mint(elsewhere, authslurm.ContextAuth, 0, 0, anyUID, nil), ""},
		{"launch context", mint(nil, authslurm.ContextLaunch, 0, 0, anyUID, nil), "want auth or sack"},
		{"sack context", mint(nil, authslurm.ContextSACK, 0, 0, anyUID, nil), ""},
		{"ordinary user", mint(nil, authslurm.ContextSACK, uint32(uid), uint32(gid), anyUID, nil), "security violation"},
		{"garbage token", raw(0, "garbage"), "jwt_decode"},
		{"alg none", algNone, "jwt_decode"},
		{"no auth block", raw(slurmproto.FlagNoAuthCred, ""), "authentication failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := p.sut.NodeLog(p.sut.Nodes[0].Name)
			off := len(readFileQuiet(log))
			ref := answerOf(t, peer[p.ref].send(t, tc.frame(t, p.ref)))
			sut := answerOf(t, peer[p.sut].send(t, tc.frame(t, p.sut)))
			t.Logf("stock %s: %s; %s: %s", p.ref.Release, ref, p.label(p.sut), sut)
			want := ref
			if ref.closed && p.sut.Impl == cluster.ImplGo {
				want = tokenAnswer{msgType: slurmproto.ResponseSlurmRC, rc: slurmproto.SlurmProtocolAuthenticationError}
			}
			if sut != want {
				t.Errorf("%s answered %s, want %s (stock: %s)", p.label(p.sut), sut, want, ref)
			}
			if tc.cause == "" {
				if ref != pong {
					t.Errorf("stock answered %s to a sound token", ref)
				}
				return
			}
			if ref == pong {
				t.Errorf("stock answered a ping to a bad token")
			}
			if p.sut.Impl != cluster.ImplGo {
				return // stock's own lines: pkg/auth/authslurm's interop test
			}
			// The answer comes after the log line, but the log is written
			// asynchronously: wait for it.
			p.sut.WaitFor(t, fmt.Sprintf("slurmd-go's log line naming %q", tc.cause), tokenLogWait, func() (bool, string) {
				got := readFileQuiet(log)[off:]
				return strings.Contains(got, tc.cause) && strings.Contains(got, "peer=127.0.0.1:"), "not yet"
			})
		})
	}
	t.Run("both still serve", func(t *testing.T) {
		for _, c := range p.both() {
			wantPing(t, peer[c].send(t, peer[c].frame(t, v, slurmproto.RequestPing, nil, nil)), v)
			c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)
			if !c.NodeRunning(c.Nodes[0].Name) {
				t.Fatalf("%s: node daemon died", p.label(c))
			}
		}
	})
}
