//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Bounds of the raw exchanges below.
const (
	rawReplyTimeout = 10 * time.Second
	// A half-sent frame is dropped by the daemon after MessageTimeout.
	slowClientBound = 15 * time.Second
)

// rawPeer speaks the wire protocol to one node daemon, as an attacker or a
// broken client would, with real credentials: munge ones from the host's munged
// (the chroots share it), or auth/slurm tokens made with the cluster's slurm.key.
type rawPeer struct {
	addr string
	m    *munge.Munge    // auth/munge clusters
	tok  *authslurm.Auth // auth/slurm clusters
}

// newRawPeer is a rawPeer for the first node of c.
func newRawPeer(t *testing.T, c *cluster.Cluster) rawPeer {
	t.Helper()
	p := rawPeer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Nodes[0].Port))}
	if c.Auth == cluster.AuthSlurm {
		p.tok = tokenSigner(t, c, nil)
		return p
	}
	m, err := munge.New(munge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.m = m
	return p
}

// tokenSigner makes auth/slurm tokens as root with c's slurm.key, as slurmctld
// does; mod may change the config first (another key, another clock).
func tokenSigner(t *testing.T, c *cluster.Cluster, mod func(*authslurm.Config)) *authslurm.Auth {
	t.Helper()
	keys, _, err := authslurm.LoadKeys(authslurm.LoadOptions{KeyFile: c.SlurmKeyPath()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := authslurm.Config{Keys: keys, ClusterName: c.Name, IDs: &authslurm.IDs{}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := authslurm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// authBlock is a credential of root over payload, for anyone to decode.
func (p rawPeer) authBlock(t *testing.T, payload []byte) slurmproto.AuthBlock {
	t.Helper()
	if p.tok != nil {
		tok, err := p.tok.Encode(context.Background(), payload, auth.UIDAny)
		if err != nil {
			t.Fatal(err)
		}
		return slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: tok}
	}
	cred, err := p.m.Encode(context.Background(), payload, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	return slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}
}

// forged is a credential the cluster cannot have made: a munge credential that
// does not decode, or a token signed with another key.
func (p rawPeer) forged(t *testing.T, payload []byte) slurmproto.AuthBlock {
	t.Helper()
	if p.tok == nil {
		return slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: "MUNGE:AAAAAAAAAAAAAAAA:"}
	}
	keys, err := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte("not this cluster's key")})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authslurm.New(authslurm.Config{Keys: keys, IDs: &authslurm.IDs{}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Encode(context.Background(), payload, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	return slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: tok}
}

// frame builds a request with a credential over payload (nil: the right body hash).
func (p rawPeer) frame(t *testing.T, version uint16, typ slurmproto.MsgType, body []byte, payload []byte) []byte {
	t.Helper()
	if payload == nil {
		kind := auth.HashK12
		if version < slurmproto.Version2205 {
			kind = auth.HashNone
		}
		payload = auth.Payload(version, uint16(typ), body, kind)
	}
	return slurmproto.EncodeMessage(slurmproto.Header{Version: version, MsgType: typ}, p.authBlock(t, payload), body)
}

// frameAs is frame with the credential of an ordinary user (mungeAs, or a token
// with the user's ids as the SACK socket gives srun); user "" is root.
func (p rawPeer) frameAs(t *testing.T, user string, version uint16, typ slurmproto.MsgType, body []byte) []byte {
	t.Helper()
	if user == "" {
		return p.frame(t, version, typ, body, nil)
	}
	payload := auth.Payload(version, uint16(typ), body, auth.HashK12)
	a := slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge}
	if p.tok != nil {
		uid, gid, err := cluster.LookupUser(user)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := p.tok.Mint(authslurm.ContextSACK, uint32(uid), uint32(gid), auth.UIDAny, payload, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		a = slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginSlurm, Cred: tok}
	} else {
		a.Cred = mungeAs(t, user, payload)
	}
	return slurmproto.EncodeMessage(slurmproto.Header{Version: version, MsgType: typ}, a, body)
}

// send writes raw bytes and returns the reply (nil when the daemon closed
// the connection without one). An HTTP answer fails the test.
func (p rawPeer) send(t *testing.T, raw []byte) *slurmproto.Message {
	t.Helper()
	m, status := p.exchange(t, raw)
	if status != "" {
		t.Fatalf("answered %q, want a Slurm reply or none", status)
	}
	return m
}

// exchange is send that also takes an HTTP answer: 26.05's slurmd serves HTTP on its
// port and answers bytes it does not take for an RPC with an HTTP error
// (stockFacts.slurmdHTTP); status is then its status line and m nil.
func (p rawPeer) exchange(t *testing.T, raw []byte) (m *slurmproto.Message, status string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.addr, rawReplyTimeout)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(rawReplyTimeout))
	if _, err := conn.Write(raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	r := bufio.NewReader(conn)
	if head, err := r.Peek(len(httpPrefix)); err == nil && string(head) == httpPrefix {
		line, _ := r.ReadString('\n')
		return nil, strings.TrimSpace(line)
	}
	f, err := slurmproto.ReadFrame(r, 0)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return nil, "" // closed without a reply (stock resets, slurmd-go closes)
	}
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	m, err = slurmproto.DecodeMessage(f)
	if err != nil {
		t.Fatalf("reply does not decode: %v", err)
	}
	return m, ""
}

// httpPrefix starts an HTTP response.
const httpPrefix = "HTTP/"

// wantHTTPFromStock checks, for the stock slurmd of a release that serves HTTP on its
// port, that bytes it cannot take for an RPC got an HTTP client-error answer.
func wantHTTPFromStock(t *testing.T, c *cluster.Cluster, status string) {
	t.Helper()
	if c.Impl != cluster.ImplStock || !factsOf(t, c).slurmdHTTP {
		return
	}
	if !strings.HasPrefix(status, "HTTP/1.1 4") {
		t.Errorf("stock %s answered %q, want an HTTP 4xx status line (rpc_fingerprint failed: the HTTP parser answers)", c.StockVersion, status)
	} else {
		t.Logf("stock %s answered %q", c.StockVersion, status)
	}
}

func replyRC(t *testing.T, m *slurmproto.Message) uint32 {
	t.Helper()
	if m == nil {
		t.Fatal("no reply: the daemon closed the connection")
	}
	if m.Header.MsgType != slurmproto.ResponseSlurmRC {
		t.Fatalf("reply %s, want RESPONSE_SLURM_RC", m.Header.MsgType)
	}
	b, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b.(*slurmproto.ReturnCode).RC
}

// wantRC checks an error reply. Stock slurmd answers nothing once the
// credential fails (its auth_uid is unset); slurmd-go answers the code.
func wantRC(t *testing.T, c *cluster.Cluster, m *slurmproto.Message, rc uint32, stockSilent bool) {
	t.Helper()
	if stockSilent && c.Impl == "stock" {
		if m != nil {
			t.Logf("stock answered %s", m.Header.MsgType)
		}
		return
	}
	if got := replyRC(t, m); got != rc {
		t.Fatalf("rc %s (%d), want %s (%d)", slurmproto.RCName(got), got, slurmproto.RCName(rc), rc)
	}
}

func wantPing(t *testing.T, m *slurmproto.Message, version uint16) {
	t.Helper()
	if m == nil || m.Header.MsgType != slurmproto.ResponsePingSlurmd {
		t.Fatalf("no RESPONSE_PING_SLURMD: %+v", m)
	}
	if m.Header.Version != version {
		t.Fatalf("reply version 0x%04x, want the request's 0x%04x", m.Header.Version, version)
	}
}

// TestBadInput_DaemonKeepsServing sends malformed, oversized, slow and
// badly authenticated requests to one node daemon and shows it answers each
// with Slurm's error code (or drops the connection where no reply can be
// framed), logs the peer, and still answers a valid ping and stays IDLE.
// One node alone on its address: no other node shares munged through it,
// so a replayed credential is an attack, not forwarding.
func TestBadInput_DaemonKeepsServing(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	p := newRawPeer(t, c)
	ping := func(v uint16) []byte { return p.frame(t, v, slurmproto.RequestPing, nil, nil) }
	// Every request is framed at the release's own protocol version; the last case
	// also at the oldest one it accepts.
	v := c.ProtocolVersion
	vHi, vLo := byte(v>>8), byte(v)

	t.Run("garbage frame", func(t *testing.T) {
		raw := []byte{0, 0, 0, 6, vHi, vLo, 0xde, 0xad, 0xbe, 0xef}
		m, status := p.exchange(t, raw)
		wantHTTPFromStock(t, c, status)
		wantRC(t, c, m, slurmproto.ESlurmProtocolIncompletePacket, true)
	})
	t.Run("unsupported protocol version", func(t *testing.T) {
		f := ping(v)
		binary.BigEndian.PutUint16(f[4:], 0x1000)
		m, status := p.exchange(t, f)
		wantHTTPFromStock(t, c, status)
		wantRC(t, c, m, slurmproto.SlurmProtocolVersionError, true)
	})
	t.Run("oversized length header", func(t *testing.T) {
		if m := p.send(t, []byte{0x7f, 0xff, 0xff, 0xff, vHi, vLo}); m != nil {
			t.Fatalf("answered an oversized frame with %s", m.Header.MsgType)
		}
	})
	t.Run("forged credential", func(t *testing.T) {
		f := ping(v)
		msg, _ := slurmproto.DecodeMessage(f[4:])
		bad := slurmproto.EncodeMessage(msg.Header, p.forged(t, auth.Payload(v, uint16(slurmproto.RequestPing), nil, auth.HashK12)), msg.Body)
		wantRC(t, c, p.send(t, bad), slurmproto.SlurmProtocolAuthenticationError, true)
	})
	t.Run("replayed credential", func(t *testing.T) {
		f := ping(v)
		wantPing(t, p.send(t, f), v)
		second := p.send(t, f)
		switch {
		case c.Auth == cluster.AuthSlurm:
			// auth/slurm keeps no replay cache: a token is good until it expires.
			wantPing(t, second, v)
		case c.Impl == "stock":
			// Debian's stock slurmd is built with MULTIPLE_SLURMD and accepts replays.
		default:
			wantRC(t, c, second, slurmproto.SlurmProtocolAuthenticationError, false)
		}
	})
	t.Run("body hash mismatch", func(t *testing.T) {
		body, err := slurmproto.EncodeBody(v, slurmproto.ShutdownRequest{Options: 0})
		if err != nil {
			t.Fatalf("REQUEST_SHUTDOWN at 0x%04x (Slurm %s): %v", v, c.Release, err)
		}
		other := auth.Payload(v, uint16(slurmproto.RequestShutdown), []byte{0, 1}, auth.HashK12)
		wantRC(t, c, p.send(t, p.frame(t, v, slurmproto.RequestShutdown, body, other)), slurmproto.ESlurmProtocolIncompletePacket, false)
	})
	t.Run("unknown message type", func(t *testing.T) {
		wantRC(t, c, p.send(t, p.frame(t, v, slurmproto.MsgType(65000), nil, nil)), slurmproto.ESlurmProtocolIncompletePacket, false)
	})
	t.Run("known type the node does not serve", func(t *testing.T) {
		// REQUEST_CONTROL has no body in every release and no case in slurmd_req:
		// stock answers EINVAL and logs "invalid request"; so must slurmd-go.
		wantRC(t, c, p.send(t, p.frame(t, v, slurmproto.RequestControl, nil, nil)), slurmproto.EINVAL, false)
		want := map[string]string{cluster.ImplStock: "invalid request", cluster.ImplGo: "unsupported request type"}[c.Impl]
		c.WaitFor(t, "the node to log the unserved type", rawReplyTimeout, func() (bool, string) {
			log := readFileQuiet(c.NodeLog(c.Nodes[0].Name))
			return strings.Contains(log, want) && (c.Impl == cluster.ImplStock || strings.Contains(log, "REQUEST_CONTROL")), "node log lacks " + strconv.Quote(want)
		})
	})
	t.Run("ping from an ordinary user", func(t *testing.T) {
		c.Run(t, "", "true") // makes sure tieeuser exists
		f := p.frameAs(t, cluster.TestUser, v, slurmproto.RequestPing, nil)
		wantRC(t, c, p.send(t, f), slurmproto.ESlurmUserIDMissing, false)
	})
	t.Run("slow client is dropped", func(t *testing.T) {
		conn, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		_, _ = conn.Write([]byte{0, 0, 0, 100, vHi, vLo})
		_ = conn.SetReadDeadline(time.Now().Add(slowClientBound))
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("half-sent frame: %v after %s, want the daemon to close it", err, time.Since(start))
		}
	})
	t.Run("still serves a valid ping, newest and oldest accepted headers", func(t *testing.T) {
		wantPing(t, p.send(t, ping(v)), v)
		wantPing(t, p.send(t, ping(c.MinProtocolVersion)), c.MinProtocolVersion)
		c.WaitNodes(t, "idle", c.NodeNames(), nodeBackIdleTimeout)
		if !c.NodeRunning(c.Nodes[0].Name) {
			t.Fatal("node daemon died")
		}
	})
	if c.Impl == "go" {
		t.Run("log names cause and peer", func(t *testing.T) {
			log := readFile(t, c.NodeLog(c.Nodes[0].Name))
			for _, want := range []string{"authentication failed", "message hash check failed", "malformed request", "peer=127.0.0.1:"} {
				if !strings.Contains(log, want) {
					t.Errorf("node log lacks %q", want)
				}
			}
		})
	}
}

// TestForwarding_TreeWidth: with TreeWidth=2 a message to all four nodes goes
// to two of them, each with a forward list, and they relay to the others;
// every node stays up, which slurmctld only allows when the relayed replies
// come back.
func TestForwarding_TreeWidth(t *testing.T) {
	c := cluster.Start(t, cluster.Options{ExtraConf: []string{"SlurmdDebug=debug3"}})
	marker := map[string]string{"go": "forwarding request", "stock": "forward: send to"}[c.Impl]
	// A ping round need not forward: slurmctld pings only the nodes that have
	// not answered for SlurmdTimeout/3, often fewer than TreeWidth (CI 24.11
	// saw none in 21 s). A job on all nodes always does: srun's launch and
	// slurmctld's REQUEST_TERMINATE_JOB both go out through the tree.
	if out, errOut, err := c.Run(t, "", "srun", "-N", strconv.Itoa(len(c.Nodes)), "true"); err != nil {
		t.Fatalf("srun -N%d true: %v (stdout %q, stderr %q)", len(c.Nodes), err, out, errOut)
	}
	c.WaitFor(t, "a node to relay a forwarded message", c.MessageTimeout+10*time.Second, func() (bool, string) {
		for _, n := range c.NodeNames() {
			if strings.Contains(readFileQuiet(c.NodeLog(n)), marker) {
				return true, ""
			}
		}
		return false, "no node log has " + strconv.Quote(marker)
	})
	// The job's nodes are COMPLETING until each has reported its Epilog.
	c.WaitNodes(t, "idle", c.NodeNames(), nodeIdleTimeout)
	// Hold: two more ping rounds with forwarding, nobody NOT_RESPONDING.
	deadline := time.Now().Add(2*c.PingInterval + 2*time.Second)
	for time.Now().Before(deadline) {
		st, err := c.NodeStates(t)
		if err != nil {
			t.Fatal(err)
		}
		for n, s := range st {
			if s != "idle" {
				t.Fatalf("node %s is %s while forwarding", n, s)
			}
		}
		time.Sleep(statePollInterval)
	}
	if strings.Contains(readFileQuiet(c.CtldLog()), "failed to forward") {
		t.Fatal("slurmctld logged a forwarding failure")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readFileQuiet(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
