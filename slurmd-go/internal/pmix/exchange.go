package pmix

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Sender delivers data to the unix socket address (a path with the
// unexpanded SlurmdSpoolDir pattern, expanded by each receiving slurmd) on
// each of nodes: REQUEST_FORWARD_DATA, as pmixp_utils.c's slurm_forward_data.
type Sender interface {
	Send(ctx context.Context, nodes []string, address string, data []byte) error
}

// toHelper is what the exchange hands the helper (helper implements it).
type toHelper interface {
	fenceResult(id uint32, status int32, data []byte) error
	modexReply(id uint32, status int32, data []byte) error
	modexServe(id, rank uint32) error
}

// Node-to-node message types; each message starts with wireVersion.
const (
	wireVersion    byte = 1
	wireContrib    byte = 'C' // u32 from node | u16 key length | key | data
	wireModexReq   byte = 'Q' // u32 from node | u32 request | u32 rank
	wireModexReply byte = 'A' // u32 request | i32 status | data
)

// exchange is the step's inter-node part: fences over the nodes that host
// the fence's ranks (every node sends its contribution to every other one,
// as pmixp's tree ends with every node holding all of them) and direct
// modex requests to the node hosting the rank.
type exchange struct {
	log     hclog.Logger
	job     *Job
	nodeOf  []int
	h       toHelper
	send    Sender
	address string
	timeout time.Duration
	fatal   func(error)
	onAbort func(status int32, rank uint32, msg string) // nil: fatal

	mu        sync.Mutex
	seq       map[string]int         // guarded by mu: fences seen per proc set
	colls     map[string]*coll       // guarded by mu: open fences by key
	serving   map[uint32]serveReq    // guarded by mu: modex requests our helper is answering
	nextServe uint32                 // guarded by mu
	waiting   map[uint32]*time.Timer // guarded by mu: our helper's modex requests
}

type coll struct {
	nodes   []int // participating node indexes, ascending
	local   bool  // our helper has contributed
	id      uint32
	contrib map[int][]byte
	timer   *time.Timer
}

type serveReq struct {
	from int
	req  uint32
}

func newExchange(job *Job, h toHelper, send Sender, address string, timeout time.Duration, fatal func(error), log hclog.Logger) *exchange {
	return &exchange{
		log: log, job: job, nodeOf: job.nodeOf(), h: h, send: send, address: address,
		timeout: timeout, fatal: fatal,
		seq: map[string]int{}, colls: map[string]*coll{}, serving: map[uint32]serveReq{}, waiting: map[uint32]*time.Timer{},
	}
}

// participants are the nodes hosting ranks (all for the wildcard) and the
// fence's signature, the same on every node.
func (e *exchange) participants(ranks []uint32) ([]int, string, error) {
	if slices.Contains(ranks, rankWildcard) || len(ranks) == 0 {
		all := make([]int, len(e.job.Nodes))
		for i := range all {
			all[i] = i
		}
		return all, "*", nil
	}
	set := map[int]bool{}
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	var sig []string
	for _, r := range rs {
		if int64(r) >= int64(len(e.nodeOf)) {
			return nil, "", fmt.Errorf("pmix: fence names rank %d of a %d-task step", r, len(e.nodeOf))
		}
		set[e.nodeOf[r]] = true
		sig = append(sig, strconv.FormatUint(uint64(r), 10))
	}
	nodes := make([]int, 0, len(set))
	for n := range set {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	key := strings.Join(sig, ",")
	if len(key) > maxSigLen {
		// the wire carries the key in a u16: a long rank list goes as its hash
		sum := sha256.Sum256([]byte(key))
		key = "h" + hex.EncodeToString(sum[:])
	}
	return nodes, key, nil
}

// maxSigLen bounds a fence signature sent as is.
const maxSigLen = 256

func (e *exchange) getColl(key string) *coll {
	c := e.colls[key]
	if c == nil {
		c = &coll{contrib: map[int][]byte{}}
		e.colls[key] = c
	}
	return c
}

// fence is our helper's contribution (events).
func (e *exchange) fence(m fenceMsg) {
	nodes, sig, err := e.participants(m.ranks)
	if err != nil {
		e.h.fenceResult(m.id, pmixError, nil)
		e.fatal(err)
		return
	}
	e.mu.Lock()
	key := sig + "#" + strconv.Itoa(e.seq[sig])
	e.seq[sig]++
	c := e.getColl(key)
	c.nodes, c.local, c.id = nodes, true, m.id
	c.contrib[e.job.NodeID] = m.data
	c.timer = time.AfterFunc(e.timeout, func() { e.expire(key) })
	done := e.completeLocked(key, c)
	e.mu.Unlock()
	var others []string
	for _, n := range nodes {
		if n != e.job.NodeID {
			others = append(others, e.job.Nodes[n])
		}
	}
	if len(others) > 0 {
		msg := []byte{wireVersion, wireContrib}
		msg = binary.BigEndian.AppendUint32(msg, uint32(e.job.NodeID))
		msg = binary.BigEndian.AppendUint16(msg, uint16(len(key)))
		msg = append(append(msg, key...), m.data...)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
			defer cancel()
			if err := e.send.Send(ctx, others, e.address, msg); err != nil {
				e.fatal(fmt.Errorf("pmix: fence contribution of node %s to %s: %w", e.job.Nodes[e.job.NodeID], strings.Join(others, ","), err))
			}
		}()
	}
	if done != nil {
		done()
	}
}

// completeLocked returns the delivery of c's result once every node has
// contributed, nil before. Caller holds mu.
func (e *exchange) completeLocked(key string, c *coll) func() {
	if !c.local || len(c.contrib) < len(c.nodes) {
		return nil
	}
	for _, n := range c.nodes {
		if _, ok := c.contrib[n]; !ok {
			return nil
		}
	}
	delete(e.colls, key)
	c.timer.Stop()
	var data []byte
	for _, n := range c.nodes {
		data = append(data, c.contrib[n]...)
	}
	id := c.id
	return func() {
		if err := e.h.fenceResult(id, pmixSuccess, data); err != nil {
			e.fatal(err)
		}
	}
}

func (e *exchange) expire(key string) {
	e.mu.Lock()
	c := e.colls[key]
	if c == nil {
		e.mu.Unlock()
		return
	}
	delete(e.colls, key)
	var missing []string
	for _, n := range c.nodes {
		if _, ok := c.contrib[n]; !ok {
			missing = append(missing, e.job.Nodes[n])
		}
	}
	e.mu.Unlock()
	e.h.fenceResult(c.id, pmixErrTimeout, nil)
	e.fatal(fmt.Errorf("pmix: fence of step %d.%d timed out after %s: no contribution from %s", e.job.JobID, e.job.StepID, e.timeout, strings.Join(missing, ",")))
}

// modexRequest is our helper asking for a rank's data (events).
func (e *exchange) modexRequest(id, rank uint32) {
	if int64(rank) >= int64(len(e.nodeOf)) {
		e.h.modexReply(id, pmixError, nil)
		return
	}
	owner := e.nodeOf[rank]
	e.mu.Lock()
	e.waiting[id] = time.AfterFunc(e.timeout, func() {
		e.mu.Lock()
		_, ok := e.waiting[id]
		delete(e.waiting, id)
		e.mu.Unlock()
		if ok {
			e.log.Error("direct modex timed out", "rank", rank, "node", e.job.Nodes[owner], "timeout", e.timeout)
			e.h.modexReply(id, pmixErrTimeout, nil)
		}
	})
	e.mu.Unlock()
	if owner == e.job.NodeID {
		e.serveModex(e.job.NodeID, id, rank)
		return
	}
	msg := []byte{wireVersion, wireModexReq}
	msg = binary.BigEndian.AppendUint32(msg, uint32(e.job.NodeID))
	msg = binary.BigEndian.AppendUint32(msg, id)
	msg = binary.BigEndian.AppendUint32(msg, rank)
	go e.sendTo(owner, msg)
}

func (e *exchange) sendTo(node int, msg []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	if err := e.send.Send(ctx, []string{e.job.Nodes[node]}, e.address, msg); err != nil {
		e.log.Error("send to node failed", "node", e.job.Nodes[node], "error", err)
	}
}

func (e *exchange) serveModex(from int, req, rank uint32) {
	e.mu.Lock()
	s := e.nextServe
	e.nextServe++
	e.serving[s] = serveReq{from: from, req: req}
	e.mu.Unlock()
	if err := e.h.modexServe(s, rank); err != nil {
		e.fatal(err)
	}
}

// modexServed is our helper's answer to a request it was given (events).
func (e *exchange) modexServed(s uint32, status int32, data []byte) {
	e.mu.Lock()
	r, ok := e.serving[s]
	delete(e.serving, s)
	e.mu.Unlock()
	if !ok {
		e.log.Warn("modex answer for no request", "id", s)
		return
	}
	if r.from == e.job.NodeID {
		e.modexDeliver(r.req, status, data)
		return
	}
	msg := []byte{wireVersion, wireModexReply}
	msg = binary.BigEndian.AppendUint32(msg, r.req)
	msg = binary.BigEndian.AppendUint32(msg, uint32(status))
	go e.sendTo(r.from, append(msg, data...))
}

func (e *exchange) modexDeliver(id uint32, status int32, data []byte) {
	e.mu.Lock()
	t, ok := e.waiting[id]
	delete(e.waiting, id)
	e.mu.Unlock()
	if !ok {
		return // answered by its timeout already
	}
	t.Stop()
	if err := e.h.modexReply(id, status, data); err != nil {
		e.fatal(err)
	}
}

// abort is a rank's PMIx_Abort (events): stock tells srun the status and
// kills the step (pmixp_lib_abort).
func (e *exchange) abort(status int32, rank uint32, msg string) {
	// Debug, as stock's _abort_fn (PMIXP_DEBUG): not a line on the job's stderr.
	e.log.Debug("PMIx_Abort", "rank", rank, "status", status, "message", msg)
	if e.onAbort != nil {
		e.onAbort(status, rank, msg)
		return
	}
	e.fatal(fmt.Errorf("pmix: rank %d called PMIx_Abort (status %d): %s", rank, status, msg))
}

// inbound is one message another node's step manager sent.
func (e *exchange) inbound(b []byte) error {
	if len(b) < 2 || b[0] != wireVersion {
		return fmt.Errorf("%w: inbound message of %d bytes, version %v", ErrProtocol, len(b), b[:min(len(b), 1)])
	}
	p := b[2:]
	switch b[1] {
	case wireContrib:
		if len(p) < 6 {
			return fmt.Errorf("%w: contribution of %d bytes", ErrProtocol, len(p))
		}
		from := int(binary.BigEndian.Uint32(p))
		kl := int(binary.BigEndian.Uint16(p[4:]))
		if len(p) < 6+kl || from < 0 || from >= len(e.job.Nodes) || from == e.job.NodeID {
			return fmt.Errorf("%w: contribution from node %d, key of %d bytes in %d", ErrProtocol, from, kl, len(p))
		}
		key := string(p[6 : 6+kl])
		e.mu.Lock()
		c := e.getColl(key)
		c.contrib[from] = p[6+kl:]
		done := e.completeLocked(key, c)
		e.mu.Unlock()
		if done != nil {
			done()
		}
	case wireModexReq:
		if len(p) != 12 {
			return fmt.Errorf("%w: modex request of %d bytes", ErrProtocol, len(p))
		}
		from := int(binary.BigEndian.Uint32(p))
		if from < 0 || from >= len(e.job.Nodes) {
			return fmt.Errorf("%w: modex request from node %d", ErrProtocol, from)
		}
		e.serveModex(from, binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:]))
	case wireModexReply:
		if len(p) < 8 {
			return fmt.Errorf("%w: modex reply of %d bytes", ErrProtocol, len(p))
		}
		e.modexDeliver(binary.BigEndian.Uint32(p), int32(binary.BigEndian.Uint32(p[4:])), p[8:])
	default:
		return fmt.Errorf("%w: inbound message type %q", ErrProtocol, b[1])
	}
	return nil
}

// stop ends every timer (the step is ending).
func (e *exchange) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.colls {
		if c.timer != nil {
			c.timer.Stop()
		}
	}
	for _, t := range e.waiting {
		t.Stop()
	}
}
