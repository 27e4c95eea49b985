package ctld

import (
	"context"
	"errors"
	"fmt"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// RCError is a slurmctld refusal: the Slurm return code it answered.
type RCError struct{ RC uint32 }

func (e *RCError) Error() string { return "slurmctld refused: " + slurmproto.RCName(e.RC) }

// UpdateNode sends REQUEST_UPDATE_NODE as `scontrol update NodeName=...`
// does; the daemon signs it as root, the only sender slurmctld takes it from
// besides SlurmUser. A refusal is an *RCError.
func (c *Client) UpdateNode(ctx context.Context, m slurmproto.UpdateNode) error {
	reply, err := c.Call(ctx, &m, auth.UIDAny)
	if err != nil {
		return fmt.Errorf("update node %s: %w", m.NodeNames, err)
	}
	if r, ok := reply.(*slurmproto.ReturnCode); ok && r.RC != 0 {
		return fmt.Errorf("update node %s: %w", m.NodeNames, &RCError{RC: r.RC})
	}
	return nil
}

// Drain drains node with reason (State=DRAIN Reason=...).
func (c *Client) Drain(ctx context.Context, node, reason string) error {
	m := slurmproto.NewUpdateNode(node)
	m.NodeState, m.Reason = slurmproto.NodeStateDrain, reason
	return c.UpdateNode(ctx, m)
}

// Resume lifts node's drain (State=RESUME).
func (c *Client) Resume(ctx context.Context, node string) error {
	m := slurmproto.NewUpdateNode(node)
	m.NodeState = slurmproto.NodeResume
	return c.UpdateNode(ctx, m)
}

// ErrNoSuchNode: slurmctld has no node of that name.
var ErrNoSuchNode = errors.New("slurmctld has no such node")

// Node reads node's record head from slurmctld (REQUEST_NODE_INFO_SINGLE,
// as slurm_load_node_single): its state bits and reason.
func (c *Client) Node(ctx context.Context, node string) (*slurmproto.NodeRecord, error) {
	reply, err := c.Call(ctx, &slurmproto.NodeInfoSingle{NodeName: node, ShowFlags: showAll}, auth.UIDAny)
	if err != nil {
		return nil, fmt.Errorf("node info %s: %w", node, err)
	}
	switch r := reply.(type) {
	case *slurmproto.NodeInfo:
		if r.Node == nil || r.Node.Name != node {
			return nil, fmt.Errorf("node info %s: %w", node, ErrNoSuchNode)
		}
		return r.Node, nil
	case *slurmproto.ReturnCode:
		return nil, fmt.Errorf("node info %s: %w", node, &RCError{RC: r.RC})
	}
	return nil, fmt.Errorf("node info %s: unexpected reply %v", node, reply.MsgType())
}

// showAll is SHOW_ALL: hidden partitions' nodes too.
const showAll = 0x0001

// ResumeIfReason lifts node's drain only while slurmctld still holds it
// drained for exactly reason, so that a drain an administrator set, or one
// whose reason was changed since, is left alone. It reports whether it
// resumed.
func (c *Client) ResumeIfReason(ctx context.Context, node, reason string) (bool, error) {
	r, err := c.Node(ctx, node)
	if err != nil {
		return false, err
	}
	if r.NodeState&slurmproto.NodeStateDrain == 0 || r.Reason != reason {
		return false, nil
	}
	return true, c.Resume(ctx, node)
}

// Reconfigure sends REQUEST_RECONFIGURE, as `scontrol reconfigure` does:
// slurmctld re-reads slurm.conf and topology.conf (24.11+ by restarting
// itself). Only root and SlurmUser may; a refusal is an *RCError.
func (c *Client) Reconfigure(ctx context.Context) error {
	reply, err := c.Call(ctx, slurmproto.EmptyBody{Type: slurmproto.RequestReconfigure}, auth.UIDAny)
	if err != nil {
		return fmt.Errorf("reconfigure: %w", err)
	}
	if r, ok := reply.(*slurmproto.ReturnCode); ok && r.RC != 0 {
		return fmt.Errorf("reconfigure: %w", &RCError{RC: r.RC})
	}
	return nil
}
