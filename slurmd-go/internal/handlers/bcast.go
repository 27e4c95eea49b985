package handlers

import (
	"context"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Bcast is what REQUEST_FILE_BCAST needs: the node's file transfers
// (internal/bcast). ServeBcast blocks on munged and the disk; it returns
// the rc of the RESPONSE_SLURM_RC.
type Bcast interface {
	ServeBcast(ctx context.Context, version uint16, uid, gid uint32, msg *slurmproto.FileBcast) uint32
}

// BcastRoutes returns the route of sbcast's and srun --bcast's blocks. Any
// user may send them: the sbcast credential says whose job it is.
func BcastRoutes(b Bcast) rpc.Registry {
	return rpc.Registry{
		slurmproto.RequestFileBcast: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			return rpc.RC(b.ServeBcast(ctx, req.Header.Version, req.UID, req.GID, req.Body.(*slurmproto.FileBcast))), nil
		}},
	}
}
