package ctld

import (
	"context"
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
