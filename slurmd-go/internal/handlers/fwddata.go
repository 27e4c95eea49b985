package handlers

import (
	"context"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// ForwardData is what REQUEST_FORWARD_DATA needs (internal/fwddata.Node):
// Serve blocks on a unix socket of this node and returns the rc.
type ForwardData interface {
	Serve(uid, gid uint32, msg *slurmproto.ForwardData) uint32
}

// ForwardDataRoutes returns the route of mpi/pmi2's and mpi/pmix's data
// relay. Any user may send it: the socket is connected with the sender's
// identity, so it reaches only what that user could.
func ForwardDataRoutes(f ForwardData) rpc.Registry {
	return rpc.Registry{
		slurmproto.RequestForwardData: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			return rpc.RC(f.Serve(req.UID, req.GID, req.Body.(*slurmproto.ForwardData))), nil
		}},
	}
}
