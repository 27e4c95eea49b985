package jobmgr

import (
	"context"
	"net/netip"
	"syscall"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// StepStat serves REQUEST_JOB_STEP_STAT (sstat, req.c _rpc_stat_jobacct):
// the step's accounting and pids, asked of its step manager. With
// jobacct_gather/none there is no accounting record (u8 0, 0 tasks).
func (m *Manager) StepStat(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) slurmproto.Body {
	cfg := m.cfg()
	var resp *slurmproto.JobStepStatResponse
	rc := m.withOwnedStep(ctx, id, uid, privileged, func(ctx context.Context, c *stepapi.Conn) {
		resp = &slurmproto.JobStepStatResponse{Pids: slurmproto.JobStepPidsResponse{NodeName: cfg.NodeName}}
		if pids, err := c.ListPIDs(ctx); err == nil {
			resp.Pids.PIDs = pids
		} else {
			m.log.Debug("no pids for step", "step", id, "error", err)
		}
	})
	if rc != 0 {
		return slurmproto.ReturnCode{RC: rc}
	}
	return resp
}

// StepPids serves REQUEST_JOB_STEP_PIDS (req.c _rpc_list_pids).
func (m *Manager) StepPids(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) slurmproto.Body {
	cfg := m.cfg()
	resp := &slurmproto.JobStepPidsResponse{NodeName: cfg.NodeName}
	rc := m.withOwnedStep(ctx, id, uid, privileged, func(ctx context.Context, c *stepapi.Conn) {
		if pids, err := c.ListPIDs(ctx); err == nil {
			resp.PIDs = pids
		}
	})
	if rc != 0 {
		return slurmproto.ReturnCode{RC: rc}
	}
	return resp
}

// withOwnedStep connects to a step manager and runs f if uid owns the
// step or is privileged; the rc is ESLURM_INVALID_JOB_ID when the step is
// not here and ESLURM_USER_ID_MISSING for someone else's step.
func (m *Manager) withOwnedStep(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool, f func(ctx context.Context, c *stepapi.Conn)) uint32 {
	cfg := m.cfg()
	ref := stepapi.StepRef{StepID: id, Path: stepapi.SocketPath(cfg.SpoolDir, cfg.NodeName, id)}
	rc := uint32(0)
	err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
		owner, err := c.UID(ctx)
		if err != nil {
			return err
		}
		if uid != owner && !privileged {
			m.log.Error("step request from a user who does not own the step", "step", id, "uid", uid, "owner", owner)
			rc = slurmproto.ESlurmUserIDMissing
			return nil
		}
		f(ctx, c)
		return nil
	})
	if err != nil && rc == 0 {
		m.log.Debug("step manager not reachable", "step", id, "error", err)
		rc = slurmproto.ESlurmInvalidJobID
	}
	return rc
}

// ioKeyMin is SLURM_IO_KEY_SIZE: a shorter signature cannot be an io key.
const ioKeyMin = 8

// Reattach serves REQUEST_REATTACH_TASKS (sattach, req.c
// _rpc_reattach_tasks): the step manager connects its I/O to the client's
// io port and sends it task exits; the reply lists the local tasks.
func (m *Manager) Reattach(ctx context.Context, req *slurmproto.ReattachTasks, uid uint32, privileged bool, orig slurmproto.Addr) *slurmproto.ReattachTasksResponse {
	cfg := m.cfg()
	resp := &slurmproto.ReattachTasksResponse{NodeName: cfg.NodeName}
	ref := stepapi.StepRef{StepID: req.StepID, Path: stepapi.SocketPath(cfg.SpoolDir, cfg.NodeName, req.StepID)}
	err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
		owner, err := c.UID(ctx)
		if err != nil {
			resp.RC = slurmproto.ESlurmInvalidJobID
			return nil
		}
		nodeID, err := c.NodeID(ctx)
		if err != nil {
			resp.RC = slurmproto.ESlurmInvalidJobID
			return nil
		}
		if uid != owner && !privileged {
			m.log.Error("attempt to attach to a step of another user", "step", req.StepID, "uid", uid, "owner", owner)
			resp.RC = uint32(syscall.EPERM)
			return nil
		}
		host := orig.AddrPort.Addr()
		port := func(ports []uint16) netip.AddrPort {
			if len(ports) == 0 {
				return orig.AddrPort
			}
			return netip.AddrPortFrom(host, ports[int(nodeID)%len(ports)])
		}
		var key []byte
		if req.Cred != nil {
			key = req.Cred.Signature
		}
		if len(key) < ioKeyMin {
			m.log.Error("incorrect credential signature length", "step", req.StepID, "length", len(key))
			resp.RC = slurmproto.SlurmError
			return nil
		}
		r, err := c.Attach(ctx, port(req.IOPorts), port(req.RespPorts), key, uid)
		if err != nil {
			return err
		}
		if r.RC != 0 {
			resp.RC = uint32(r.RC)
			return nil
		}
		resp.LocalPIDs, resp.GTIDs, resp.Executables = r.PIDs, r.GTIDs, r.Executables
		return nil
	})
	if err != nil {
		m.log.Debug("reattach", "step", req.StepID, "error", err)
		if resp.RC == 0 {
			resp.RC = slurmproto.ESlurmInvalidJobID
		}
	}
	return resp
}
