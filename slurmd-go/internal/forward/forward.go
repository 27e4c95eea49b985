// Package forward relays a message down Slurm's fan-out tree: the forward
// list in a request header is split by TreeWidth, the first node of each span
// gets the untouched auth block and body with the rest of its span in its own
// header, and every node's reply (its own plus its ret_list) comes back as a
// ret_list entry. Nodes that do not answer are reported as
// RESPONSE_FORWARD_FAILED, as slurmd does.
package forward

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Timeouts.
const (
	// ConnectTimeout bounds one dial to a child; slurmd's connect uses the
	// same order of magnitude before it gives up on a node.
	ConnectTimeout = 5 * time.Second
)

// Resolver gives a node's address ("host:port") from slurm.conf.
type Resolver func(node string) (string, bool)

// Config is what the forwarder reads from slurm.conf.
type Config struct {
	Resolve        Resolver
	TreeWidth      int           // TreeWidth, used when the header carries 0
	MessageTimeout time.Duration // MessageTimeout
	MaxFrame       uint32
}

// Forwarder implements rpc.Forwarder.
type Forwarder struct {
	cfg Config
	log hclog.Logger
}

var _ rpc.Forwarder = (*Forwarder)(nil)

// New returns a forwarder.
func New(cfg Config, log hclog.Logger) *Forwarder {
	if cfg.TreeWidth <= 0 {
		cfg.TreeWidth = 50
	}
	if cfg.MessageTimeout <= 0 {
		cfg.MessageTimeout = 10 * time.Second
	}
	return &Forwarder{cfg: cfg, log: log.Named("forward")}
}

// noReplyTypes are relayed without waiting: their senders expect nothing
// and forwarders count a successful send as done.
var noReplyTypes = map[slurmproto.MsgType]bool{
	slurmproto.RequestShutdown:    true,
	slurmproto.RequestReconfigure: true,
	slurmproto.RequestRebootNodes: true,
}

type pending struct {
	done    chan struct{}
	mu      sync.Mutex
	entries []slurmproto.RetEntry // guarded by mu
}

func (p *pending) add(e ...slurmproto.RetEntry) {
	p.mu.Lock()
	p.entries = append(p.entries, e...)
	p.mu.Unlock()
}

// Wait implements rpc.Pending.
func (p *pending) Wait(ctx context.Context) []slurmproto.RetEntry {
	select {
	case <-p.done:
	case <-ctx.Done():
		// The spans finish on their own deadlines; report what is in.
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]slurmproto.RetEntry(nil), p.entries...)
}

// Start implements rpc.Forwarder. Any goroutine; returns at once.
func (f *Forwarder) Start(ctx context.Context, h slurmproto.Header, authAndBody []byte, orig slurmproto.Addr) rpc.Pending {
	p := &pending{done: make(chan struct{})}
	nodes, err := hostlist.Expand(h.Forward.Nodes)
	if err != nil {
		f.log.Error("bad forward list", "nodes", h.Forward.Nodes, "error", err)
		close(p.done)
		return p
	}
	width := int(h.Forward.TreeWidth)
	if width == 0 {
		width = f.cfg.TreeWidth
	}
	var spans [][]string
	if h.Version >= slurmproto.Version2411 {
		// 24.11+ forward_msg: its own tree split, and the hop timeout
		// scaled by the depth below us over the depth the sender saw.
		var depth int
		spans, depth = hostlist.SplitTree(nodes, width)
		if h.Forward.TreeDepth > 0 {
			h.Forward.TimeoutMS = uint32(uint64(h.Forward.TimeoutMS) * uint64(depth) / uint64(h.Forward.TreeDepth))
		} else {
			h.Forward.TimeoutMS *= uint32(2 * depth)
		}
		h.Forward.TreeDepth = uint16(depth)
	} else {
		spans = hostlist.Split(nodes, width)
	}
	hopTimeout := time.Duration(h.Forward.TimeoutMS) * time.Millisecond
	if hopTimeout <= 0 {
		hopTimeout = f.cfg.MessageTimeout
	}
	var wg sync.WaitGroup
	for _, span := range spans {
		wg.Add(1)
		go func(span []string) {
			defer wg.Done()
			f.relaySpan(ctx, h, authAndBody, orig, span, width, hopTimeout, p)
		}(span)
	}
	go func() { wg.Wait(); close(p.done) }()
	return p
}

// relaySpan sends to the first reachable node of span, handing it the rest;
// a node that fails is reported and the next one takes over its subtree.
func (f *Forwarder) relaySpan(ctx context.Context, h slurmproto.Header, authAndBody []byte, orig slurmproto.Addr, span []string, width int, hopTimeout time.Duration, p *pending) {
	for i, name := range span {
		rest := span[i+1:]
		entries, err := f.relayOne(ctx, h, authAndBody, orig, name, rest, width, hopTimeout)
		if err == nil {
			p.add(entries...)
			return
		}
		f.log.Warn("forward failed", "node", name, "msg_type", h.MsgType.String(), "error", err)
		p.add(failed(name, rcOf(err)))
	}
}

func (f *Forwarder) relayOne(ctx context.Context, h slurmproto.Header, authAndBody []byte, orig slurmproto.Addr, name string, rest []string, width int, hopTimeout time.Duration) ([]slurmproto.RetEntry, error) {
	addr, ok := f.cfg.Resolve(name)
	if !ok {
		return nil, rpc.WithRC(slurmproto.SlurmUnknownForwardAddr, fmt.Errorf("forward: no address for node %s", name))
	}
	fh := slurmproto.Header{
		Version:    h.Version,
		Flags:      h.Flags,
		MsgIndex:   h.MsgIndex,
		MsgType:    h.MsgType,
		BodyLength: h.BodyLength,
		OrigAddr:   orig,
	}
	timeout := hopTimeout
	if len(rest) > 0 {
		fh.Forward = slurmproto.Forward{
			Count:     uint16(len(rest)),
			Nodes:     hostlist.Compress(rest),
			TimeoutMS: h.Forward.TimeoutMS,
			TreeWidth: uint16(width),
			NetCred:   h.Forward.NetCred,
			TreeDepth: h.Forward.TreeDepth,
		}
		// forward.c: each extra tree level may take a MessageTimeout more.
		steps := (len(rest) + 1) / width
		timeout = f.cfg.MessageTimeout*time.Duration(steps) + hopTimeout*time.Duration(steps+1)
	}
	dctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	cancel()
	if err != nil {
		return nil, rpc.WithRC(slurmproto.SlurmCommunicationsConnectionError, fmt.Errorf("forward: connect %s (%s): %w", name, addr, err))
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(slurmproto.EncodeForward(fh, authAndBody)); err != nil {
		return nil, rpc.WithRC(slurmproto.SlurmCommunicationsSendError, fmt.Errorf("forward: send to %s: %w", name, err))
	}
	if noReplyTypes[h.MsgType] {
		out := []slurmproto.RetEntry{{NodeName: name}}
		for _, n := range rest {
			out = append(out, slurmproto.RetEntry{NodeName: n})
		}
		return out, nil
	}
	frame, err := slurmproto.ReadFrame(conn, f.cfg.MaxFrame)
	if err != nil {
		return nil, rpc.WithRC(slurmproto.SlurmCommunicationsReceiveError, fmt.Errorf("forward: reply from %s: %w", name, err))
	}
	// Replies on the forward path are not authenticated (slurm_receive_resp_msgs):
	// the originator verifies nothing of them either.
	msg, err := slurmproto.DecodeMessage(frame)
	if err != nil {
		return nil, rpc.WithRC(slurmproto.ESlurmProtocolIncompletePacket, fmt.Errorf("forward: reply from %s: %w", name, err))
	}
	own, err := ownEntry(msg, name)
	if err != nil {
		return nil, rpc.WithRC(slurmproto.ESlurmProtocolIncompletePacket, fmt.Errorf("forward: reply from %s: %w", name, err))
	}
	out := append([]slurmproto.RetEntry{own}, msg.Header.RetList...)
	for i := range out {
		if out[i].NodeName == "" {
			out[i].NodeName = name
		}
	}
	if len(rest) > 0 && len(out) <= 1 {
		return nil, rpc.WithRC(slurmproto.SlurmCommunicationsReceiveError, fmt.Errorf("forward: %s answered for itself only, not for %d forwarded nodes", name, len(rest)))
	}
	return out, nil
}

// ownEntry turns a child's reply body into a ret_list entry. RC_MSG is
// re-emitted as a plain RC, as slurm's unpacker does.
func ownEntry(msg *slurmproto.Message, name string) (slurmproto.RetEntry, error) {
	e := slurmproto.RetEntry{MsgType: msg.Header.MsgType, NodeName: name, Body: msg.Body}
	if e.MsgType == slurmproto.ResponseSlurmRCMsg {
		b, err := slurmproto.DecodeBody(msg.Header.Version, e.MsgType, msg.Body)
		if err != nil {
			return e, err
		}
		rcm := b.(*slurmproto.ReturnCodeMsg)
		e.MsgType = slurmproto.ResponseSlurmRC
		e.Body, _ = slurmproto.EncodeBody(msg.Header.Version, slurmproto.ReturnCode{RC: rcm.RC})
	}
	return e, nil
}

func failed(name string, rc uint32) slurmproto.RetEntry {
	return slurmproto.RetEntry{Err: rc, MsgType: slurmproto.ResponseForwardFailed, NodeName: name}
}

func rcOf(err error) uint32 {
	rc := rpc.ErrorToRC(err)
	if rc == rpc.SlurmErrorRC {
		return slurmproto.SlurmCommunicationsConnectionError
	}
	return rc
}
