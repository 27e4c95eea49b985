// Package handlers holds one function per slurmd RPC family, wired into an
// rpc.Registry. Handlers decide; the node service behind them acts.
package handlers

import (
	"context"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Node is what the node-lifecycle handlers need from the daemon.
type Node interface {
	// Load returns the 5-minute load average ×100 and free memory in MiB.
	Load() (cpuLoad uint32, freeMemMB uint64)
	// Status fills RESPONSE_SLURMD_STATUS.
	Status() slurmproto.SlurmdStatus
	// Energy fills RESPONSE_ACCT_GATHER_UPDATE/ENERGY.
	Energy() slurmproto.AcctGatherEnergy
	// Reregister queues a fresh registration that asks for the TRES reply.
	Reregister()
	// Reconfigure re-reads slurm.conf, as SIGHUP does.
	Reconfigure()
	// ReconfigureWithConfig is a configless node's reconfigure: the files
	// slurmctld pushed replace the cached ones first (a node with a local
	// slurm.conf ignores them, as stock does).
	ReconfigureWithConfig(files []slurmproto.ConfigFile)
	// Shutdown stops the daemon, as SIGTERM does (running steps stay).
	Shutdown()
	// HealthCheck starts HealthCheckProgram in the background.
	HealthCheck()
	// HealthCheckVerdict is HealthCheck with slurmctld's verdict on the
	// node (26.05 REQUEST_NODE_HEALTH_CHECK), which the program sees as
	// SLURM_NODE_IS_HEALTHY=yes|no.
	HealthCheckVerdict(healthy bool)
	// Reboot runs RebootProgram (with features when given).
	Reboot(req *slurmproto.RebootNodesRequest)
	// SetDebugLevel sets the daemon's log level (a Slurm level number)
	// until slurm.conf is read again (scontrol setdebug LEVEL nodes=).
	SetDebugLevel(level uint32)
	// SetDebugFlags clears minus, then sets plus, in DebugFlags until
	// slurm.conf is read again (scontrol setdebugflags nodes=).
	SetDebugFlags(minus, plus uint64)
}

// setDebugSince is the first release whose slurmd serves REQUEST_SET_DEBUG_*;
// 22.05's answers them as any type it does not serve.
const setDebugSince = slurmproto.Version2411

// NodeRoutes returns the routes of the node lifecycle RPCs.
func NodeRoutes(n Node) rpc.Registry {
	ping := func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
		load, free := n.Load()
		if req.Type() == slurmproto.RequestNodeRegistrationStatus {
			// Answer first, then register: slurmctld waits for this reply
			// before it reads our registration.
			defer n.Reregister()
		}
		return rpc.Reply{Body: slurmproto.PingSlurmdResponse{CPULoad: load, FreeMem: free}, Copy: true}, nil
	}
	return rpc.Registry{
		slurmproto.RequestPing:                   {Handle: ping, Privileged: true, FromCtld: true},
		slurmproto.RequestNodeRegistrationStatus: {Handle: ping, Privileged: true, FromCtld: true},
		slurmproto.RequestHealthCheck: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			n.HealthCheck()
			return rpc.RC(0), nil
		}},
		slurmproto.RequestNodeHealthCheck: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			n.HealthCheckVerdict(req.Body.(*slurmproto.NodeHealthCheck).Healthy)
			return rpc.RC(0), nil
		}},
		slurmproto.RequestAcctGatherUpdate: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			e := n.Energy()
			e.Type = slurmproto.ResponseAcctGatherUpdate
			return rpc.Reply{Body: e, Copy: true}, nil
		}},
		slurmproto.RequestAcctGatherEnergy: {Privileged: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			r := req.Body.(*slurmproto.AcctGatherEnergyRequest)
			if r.ContextID == slurmproto.NoVal16 {
				return rpc.RC(slurmproto.SlurmProtocolVersionError), nil
			}
			e := n.Energy()
			e.Type = slurmproto.ResponseAcctGatherEnergy
			return rpc.Reply{Body: e, Copy: true}, nil
		}},
		slurmproto.RequestDaemonStatus: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			return rpc.Reply{Body: n.Status(), Copy: true}, nil
		}},
		slurmproto.RequestReconfigure: {Privileged: true, NoReplyType: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			n.Reconfigure()
			return rpc.NoReply, nil
		}},
		slurmproto.RequestReconfigureWithConfig: {Privileged: true, NoReplyType: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			n.ReconfigureWithConfig(req.Body.(*slurmproto.ConfigResponse).Files)
			return rpc.NoReply, nil
		}},
		slurmproto.RequestShutdown: {Privileged: true, NoReplyType: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			n.Shutdown()
			return rpc.NoReply, nil
		}},
		slurmproto.RequestSetDebugLevel: {Privileged: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			if req.Header.Version < setDebugSince {
				return rpc.RC(slurmproto.EINVAL), nil
			}
			n.SetDebugLevel(req.Body.(*slurmproto.SetDebugLevel).Level)
			return rpc.RC(0), nil
		}},
		slurmproto.RequestSetDebugFlags: {Privileged: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			if req.Header.Version < setDebugSince {
				return rpc.RC(slurmproto.EINVAL), nil
			}
			m := req.Body.(*slurmproto.SetDebugFlags)
			n.SetDebugFlags(m.Minus, m.Plus)
			return rpc.RC(0), nil
		}},
		slurmproto.RequestRebootNodes: {Privileged: true, NoReplyType: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			r, _ := req.Body.(*slurmproto.RebootNodesRequest)
			n.Reboot(r)
			return rpc.NoReply, nil
		}},
	}
}
