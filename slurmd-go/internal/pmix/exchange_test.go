package pmix

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

type result struct {
	kind   string // fence, reply, serve
	id     uint32
	status int32
	data   string
}

// helperSide records what the exchange hands the helper.
type helperSide struct{ out chan result }

func (h *helperSide) fenceResult(id uint32, st int32, d []byte) error {
	h.out <- result{"fence", id, st, string(d)}
	return nil
}
func (h *helperSide) modexReply(id uint32, st int32, d []byte) error {
	h.out <- result{"reply", id, st, string(d)}
	return nil
}
func (h *helperSide) modexServe(id, rank uint32) error {
	h.out <- result{"serve", id, int32(rank), ""}
	return nil
}

// mesh delivers Send as each named node's inbound, as slurmd would.
type mesh struct {
	mu    sync.Mutex
	nodes map[string]*exchange
	down  map[string]bool
	sent  []string
}

func (m *mesh) Send(_ context.Context, nodes []string, address string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, strings.Join(nodes, ",")+"@"+address)
	for _, n := range nodes {
		if m.down[n] {
			return fmt.Errorf("node %s: connection refused", n)
		}
		if err := m.nodes[n].inbound(data); err != nil {
			return err
		}
	}
	return nil
}

type cluster struct {
	ex     []*exchange
	h      []*helperSide
	fatals chan error
	m      *mesh
}

func newCluster(t *testing.T, ranks [][]uint32, timeout time.Duration) *cluster {
	c := &cluster{fatals: make(chan error, 16), m: &mesh{nodes: map[string]*exchange{}, down: map[string]bool{}}}
	var names []string
	for i := range ranks {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	for i := range ranks {
		j := &Job{JobID: 5, StepID: 1, NodeID: i, Nodes: names, NodeRanks: ranks}
		h := &helperSide{out: make(chan result, 16)}
		e := newExchange(j, h, c.m, "/spool/%n/"+SocketName(5, 1), timeout, func(err error) { c.fatals <- err }, hclog.NewNullLogger())
		c.ex, c.h = append(c.ex, e), append(c.h, h)
		c.m.nodes[names[i]] = e
	}
	t.Cleanup(func() {
		for _, e := range c.ex {
			e.stop()
		}
	})
	return c
}

func (c *cluster) next(t *testing.T, node int) result {
	t.Helper()
	select {
	case r := <-c.h[node].out:
		return r
	case err := <-c.fatals:
		t.Fatalf("fatal: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("node %d: no result", node)
	}
	return result{}
}

func TestExchange_FenceAllNodes(t *testing.T) {
	c := newCluster(t, [][]uint32{{0, 1}, {2}, {3}}, time.Minute)
	// two fences in a row over every rank: the second must not mix with the first
	for round := 0; round < 2; round++ {
		for i, e := range c.ex {
			e.fence(fenceMsg{id: uint32(10*round + i), collect: true, ranks: []uint32{rankWildcard}, data: []byte(fmt.Sprintf("[%d:%d]", round, i))})
		}
		for i := range c.ex {
			r := c.next(t, i)
			want := result{"fence", uint32(10*round + i), 0, fmt.Sprintf("[%d:0][%d:1][%d:2]", round, round, round)}
			if r != want {
				t.Fatalf("round %d node %d: %+v, want %+v", round, i, r, want)
			}
		}
	}
	// each node sent each fence once to every other node, at the unexpanded address
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	count := map[string]int{}
	for _, s := range c.m.sent {
		count[s]++
	}
	for _, want := range []string{"n1,n2", "n0,n2", "n0,n1"} {
		if n := count[want+"@/spool/%n/stepd-go.pmix.5.1"]; n != 2 {
			t.Errorf("sends to %s: %d, want 2 (all sends %q)", want, n, c.m.sent)
		}
	}
	if len(c.m.sent) != 6 {
		t.Errorf("%d sends, want 6: %q", len(c.m.sent), c.m.sent)
	}
}

// TestExchange_FenceSubset: a fence over ranks of two nodes involves only
// them, and a contribution that arrives before the local one is kept.
func TestExchange_FenceSubset(t *testing.T) {
	c := newCluster(t, [][]uint32{{0}, {1}, {2}}, time.Minute)
	c.ex[2].fence(fenceMsg{id: 7, ranks: []uint32{2, 0}, data: []byte("c")})
	c.ex[0].fence(fenceMsg{id: 8, ranks: []uint32{0, 2}, data: []byte("a")})
	if r := c.next(t, 0); r != (result{"fence", 8, 0, "ac"}) {
		t.Fatalf("node 0: %+v", r)
	}
	if r := c.next(t, 2); r != (result{"fence", 7, 0, "ac"}) {
		t.Fatalf("node 2: %+v", r)
	}
	select {
	case r := <-c.h[1].out:
		t.Fatalf("node 1 is no participant, got %+v", r)
	default:
	}
}

// TestExchange_FenceTimeout: a node that never contributes fails the
// fence with PMIX_ERR_TIMEOUT and the step with an error naming it.
func TestExchange_FenceTimeout(t *testing.T) {
	c := newCluster(t, [][]uint32{{0}, {1}}, 50*time.Millisecond)
	c.ex[0].fence(fenceMsg{id: 1, ranks: []uint32{rankWildcard}})
	select {
	case err := <-c.fatals:
		if !strings.Contains(err.Error(), "fence of step 5.1 timed out after 50ms: no contribution from n1") {
			t.Fatalf("error %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no fatal error")
	}
	if r := <-c.h[0].out; r != (result{"fence", 1, pmixErrTimeout, ""}) {
		t.Fatalf("helper got %+v, want a timeout", r)
	}
}

// TestExchange_SendFails: a contribution that cannot be delivered is fatal.
func TestExchange_SendFails(t *testing.T) {
	c := newCluster(t, [][]uint32{{0}, {1}}, time.Minute)
	c.m.down["n1"] = true
	c.ex[0].fence(fenceMsg{id: 1, ranks: []uint32{rankWildcard}})
	select {
	case err := <-c.fatals:
		if !strings.Contains(err.Error(), "fence contribution of node n0 to n1: node n1: connection refused") {
			t.Fatalf("error %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no fatal error")
	}
}

func TestExchange_DirectModex(t *testing.T) {
	c := newCluster(t, [][]uint32{{0}, {1}}, time.Minute)
	c.ex[0].modexRequest(3, 1) // node 0 wants rank 1, on node 1
	s := c.next(t, 1)
	if s.kind != "serve" || s.status != 1 {
		t.Fatalf("node 1 asked %+v, want serve rank 1", s)
	}
	c.ex[1].modexServed(s.id, 0, []byte("blob1"))
	if r := c.next(t, 0); r != (result{"reply", 3, 0, "blob1"}) {
		t.Fatalf("node 0 got %+v", r)
	}
	// a stray answer is dropped, not delivered twice
	c.ex[1].modexServed(s.id, 0, []byte("again"))
	if err := c.ex[0].inbound(append([]byte{wireVersion, wireModexReply}, append(u32(3), u32(0)...)...)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-c.h[0].out:
		t.Fatalf("late answer delivered: %+v", r)
	default:
	}
}

func TestExchange_InboundBad(t *testing.T) {
	c := newCluster(t, [][]uint32{{0}, {1}}, time.Minute)
	cases := map[string][]byte{
		"empty":               nil,
		"version":             {9, wireContrib},
		"type":                {wireVersion, 'Z'},
		"short contribution":  {wireVersion, wireContrib, 0, 0},
		"key past the end":    append([]byte{wireVersion, wireContrib}, append(u32(1), 0, 200)...),
		"unknown node":        append([]byte{wireVersion, wireContrib}, append(u32(7), 0, 0)...),
		"from ourselves":      append([]byte{wireVersion, wireContrib}, append(u32(0), 0, 0)...),
		"short modex request": {wireVersion, wireModexReq, 0},
		"modex from nowhere":  append([]byte{wireVersion, wireModexReq}, append(u32(9), append(u32(0), u32(0)...)...)...),
		"short modex reply":   {wireVersion, wireModexReply, 0},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if err := c.ex[0].inbound(b); !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v, want ErrProtocol", err)
			}
		})
	}
}

func TestExchange_AbortIsFatal(t *testing.T) {
	c := newCluster(t, [][]uint32{{0}}, time.Minute)
	c.ex[0].abort(3, 0, "rank 0 gave up")
	if err := <-c.fatals; !strings.Contains(err.Error(), "rank 0 called PMIx_Abort (status 3): rank 0 gave up") {
		t.Fatalf("error %v", err)
	}
}

// TestExchange_LongSignature: a fence over many ranks keys its messages by
// a hash, so the key fits the wire's u16 length on every node alike.
func TestExchange_LongSignature(t *testing.T) {
	var ranks [][]uint32
	for n := 0; n < 2; n++ {
		var r []uint32
		for i := 0; i < 200; i++ {
			r = append(r, uint32(n*200+i))
		}
		ranks = append(ranks, r)
	}
	c := newCluster(t, ranks, time.Minute)
	var all []uint32
	for r := uint32(0); r < 400; r++ {
		all = append(all, 399-r) // any order: the signature sorts
	}
	c.ex[0].fence(fenceMsg{id: 1, ranks: all, data: []byte("a")})
	c.ex[1].fence(fenceMsg{id: 2, ranks: all[1:], data: []byte("b")}) // rank 399 left out: another fence
	c.ex[1].fence(fenceMsg{id: 3, ranks: all, data: []byte("b")})
	if r := c.next(t, 0); r != (result{"fence", 1, 0, "ab"}) {
		t.Fatalf("node 0: %+v", r)
	}
	if r := c.next(t, 1); r != (result{"fence", 3, 0, "ab"}) {
		t.Fatalf("node 1: %+v", r)
	}
}
