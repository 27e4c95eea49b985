package fwddata

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Caller sends one request to a host:port and returns the decoded reply,
// signed with the sender's own credential: the step manager's
// ctld.Client.CallAddr.
type Caller interface {
	CallAddr(ctx context.Context, host string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error)
}

// Resolver gives a node's slurmd address ("host:port").
type Resolver func(node string) (addr string, ok bool)

// NewResolver resolves node names of conf as slurmd does: NodeAddr (which
// defaults to NodeHostname), else the name, with the node's Port, else
// SlurmdPort.
func NewResolver(conf *slurmconf.Config) Resolver {
	return func(name string) (string, bool) {
		n, ok := conf.Node(name)
		if !ok {
			return "", false
		}
		host := n.Addr
		if host == "" {
			host = n.Name
		}
		port := n.Port
		if port == 0 {
			port = conf.SlurmdPort
		}
		return net.JoinHostPort(host, strconv.Itoa(int(port))), true
	}
}

// Error is Send's failure: the nodes whose slurmd refused or could not be
// reached, each with its cause. A caller that retries, as stock's
// temp_kvs_send does, sends again to Nodes only.
type Error struct {
	Nodes []string // sorted
	Errs  map[string]error
}

func (e *Error) Error() string {
	parts := make([]string, 0, len(e.Nodes))
	for _, n := range e.Nodes {
		parts = append(parts, n+": "+e.Errs[n].Error())
	}
	return "fwddata: forward data failed on " + strings.Join(parts, "; ")
}

// Unwrap lets errors.Is see the per-node causes.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, len(e.Nodes))
	for _, n := range e.Nodes {
		out = append(out, e.Errs[n])
	}
	return out
}

// Send delivers data to the unix socket address (%n/%h expanded by each
// receiving slurmd) on every node of nodes, one REQUEST_FORWARD_DATA per
// node in parallel, and waits for each slurmd's RC. It returns nil when
// every node answered 0, else an *Error naming the nodes that did not.
// Each call is bounded by c (MessageTimeout) and ctx.
func Send(ctx context.Context, c Caller, resolve Resolver, nodes []string, address string, data []byte) error {
	msg := &slurmproto.ForwardData{Address: address, Len: uint32(len(data)), Data: data}
	var mu sync.Mutex
	fail := &Error{Errs: map[string]error{}}
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := sendOne(ctx, c, resolve, node, msg)
			if err == nil {
				return
			}
			mu.Lock()
			fail.Nodes = append(fail.Nodes, node)
			fail.Errs[node] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(fail.Nodes) == 0 {
		return nil
	}
	sort.Strings(fail.Nodes)
	return fail
}

func sendOne(ctx context.Context, c Caller, resolve Resolver, node string, msg *slurmproto.ForwardData) error {
	addr, ok := resolve(node)
	if !ok {
		return fmt.Errorf("node %s is not in slurm.conf", node)
	}
	reply, err := c.CallAddr(ctx, addr, msg, auth.UIDAny)
	if err != nil {
		return err
	}
	var rc uint32
	switch r := reply.(type) {
	case *slurmproto.ReturnCode:
		rc = r.RC
	case *slurmproto.ReturnCodeMsg:
		rc = r.RC
	default:
		return fmt.Errorf("unexpected reply %s", reply.MsgType())
	}
	if rc != 0 {
		return &RCError{RC: rc}
	}
	return nil
}

// RCError is a node's answer other than success. Its own type, not
// internal/rpc's, so that the step managers that send need no RPC server
// (gnet) linked in.
type RCError struct{ RC uint32 }

func (e *RCError) Error() string { return "slurmd answered " + rcText(e.RC) }

// rcText names an RC: forward-data answers carry errnos (ENOENT when the
// socket is missing), other failures Slurm codes.
func rcText(rc uint32) string {
	if rc > 0 && rc < 1000 {
		return fmt.Sprintf("%d (%s)", rc, syscall.Errno(rc).Error())
	}
	return slurmproto.RCName(rc)
}
