package fwddata

import (
	"fmt"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Node serves REQUEST_FORWARD_DATA on this node.
type Node struct {
	// NodeName is this node's name (read per request: reconfigure may
	// change it for a dynamic node).
	NodeName func() string
	Log      hclog.Logger
}

// Serve delivers one request from the authenticated uid/gid and returns
// the RC of the RESPONSE_SLURM_RC. It blocks on the socket (bounded by
// WriteTimeout); run it on a worker.
func (n Node) Serve(uid, gid uint32, m *slurmproto.ForwardData) uint32 {
	path := Expand(m.Address, n.NodeName())
	n.Log.Trace(fmt.Sprintf("Entering _rpc_forward_data, address: %s, len: %d", path, m.Len))
	data := m.Data
	if int(m.Len) > len(data) {
		// Stock would write past its buffer; refuse instead.
		n.Log.Error("forward data: len exceeds the data sent", "address", path, "len", m.Len, "data", len(data), "uid", uid)
		return uint32(syscall.EINVAL)
	}
	data = data[:m.Len]
	rc, err := Deliver(path, uid, gid, data)
	if err != nil {
		n.Log.Debug("forward data failed", "uid", uid, "rc", rc, "error", err)
	}
	return rc
}
