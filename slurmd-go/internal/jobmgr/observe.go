package jobmgr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// StepStat serves REQUEST_JOB_STEP_STAT (sstat, req.c _rpc_stat_jobacct):
// the step's accounting and pids. With jobacct_gather/none there is no
// accounting record (u8 0, 0 tasks), so only the pids are asked for.
func (m *Manager) StepStat(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) slurmproto.Body {
	pids, rc := m.stepPIDs(ctx, id, uid, privileged)
	if rc != 0 {
		return slurmproto.ReturnCode{RC: rc}
	}
	return &slurmproto.JobStepStatResponse{Pids: *pids}
}

// StepPids serves REQUEST_JOB_STEP_PIDS (req.c _rpc_list_pids).
func (m *Manager) StepPids(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) slurmproto.Body {
	pids, rc := m.stepPIDs(ctx, id, uid, privileged)
	if rc != 0 {
		return slurmproto.ReturnCode{RC: rc}
	}
	return pids
}

// PidJob serves REQUEST_JOB_ID (scontrol pidinfo, req.c _rpc_pid2jid): the
// job of the first step whose container holds pid or whose step manager
// is pid; ESLURM_INVALID_JOB_ID when none. A step that does not answer is
// passed over, as stock passes over one it cannot connect to.
func (m *Manager) PidJob(ctx context.Context, pid uint32) slurmproto.Body {
	cfg := m.cfg()
	refs, err := stepapi.List(cfg.SpoolDir, cfg.NodeName)
	if err != nil {
		m.log.Debug("no step sockets", "error", err)
	}
	for _, ref := range refs {
		found := false
		err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
			in, err := c.PidInContainer(ctx, int(pid))
			if err != nil || in {
				found = in
				return err
			}
			d, err := c.DaemonPID(ctx)
			found = err == nil && d == int(pid)
			return err
		})
		if found {
			m.log.Trace("pid found in step", "pid", pid, "step", ref.StepID)
			return &slurmproto.JobID{JobID: ref.StepID.JobID, StepID: ref.StepID}
		}
		if err != nil {
			m.log.Debug("step manager did not answer for pidinfo", "step", ref.StepID, "error", err)
		}
	}
	m.log.Trace("pid not found in any step", "pid", pid)
	return slurmproto.ReturnCode{RC: slurmproto.ESlurmInvalidJobID}
}

// CallerID serves REQUEST_NETWORK_CALLERID (req.c _rpc_network_callerid):
// the job whose process holds this node's end of the TCP connection
// (pam_slurm_adopt asks it of the node an ssh connection came from). A
// job of another user is not named to an ordinary user. Stock answers
// with job NO_VAL, never an error code, and so does this.
func (m *Manager) CallerID(ctx context.Context, req *slurmproto.NetworkCallerID, uid uint32, privileged bool) slurmproto.Body {
	resp := &slurmproto.NetworkCallerIDResponse{JobID: slurmproto.NoVal, NodeName: m.cfg().NodeName}
	n := 4
	if req.AF == syscall.AF_INET6 {
		n = 16
	}
	local := &net.TCPAddr{IP: net.IP(req.IPSrc[:n]), Port: int(req.PortSrc)}
	remote := &net.TCPAddr{IP: net.IP(req.IPDst[:n]), Port: int(req.PortDst)}
	log := m.log.With("local", local.String(), "remote", remote.String())
	ino, err := proc.TCPInode(local, remote)
	if err != nil {
		log.Debug("network_callerid inode not found", "error", err)
		return resp
	}
	pid, ok := proc.SocketOwner(ino)
	if !ok {
		log.Debug("network_callerid process not found", "inode", ino)
		return resp
	}
	j, ok := m.PidJob(ctx, uint32(pid)).(*slurmproto.JobID)
	if !ok {
		log.Debug("network_callerid job not found", "pid", pid)
		return resp
	}
	if !privileged {
		if owner, known := m.jobUID(ctx, j.JobID); !known || owner != uid {
			m.log.Error(fmt.Sprintf("Security violation, REQUEST_NETWORK_CALLERID from uid=%d", uid))
			return resp
		}
	}
	resp.JobID, resp.StepID = j.JobID, j.StepID
	return resp
}

func (m *Manager) stepPIDs(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) (*slurmproto.JobStepPidsResponse, uint32) {
	resp := &slurmproto.JobStepPidsResponse{NodeName: m.cfg().NodeName}
	rc := m.withOwnedStep(ctx, id, uid, privileged, slurmproto.ESlurmUserIDMissing, func(ctx context.Context, c *stepapi.Conn) uint32 {
		// A step that cannot list its pids answers with none, as stock.
		if pids, err := c.ListPIDs(ctx); err == nil {
			resp.PIDs = pids
		} else {
			m.log.Debug("no pids for step", "step", id, "error", err)
		}
		return 0
	})
	return resp, rc
}

// withOwnedStep connects to a step manager and returns f's rc if uid owns
// the step or is privileged. Otherwise the rc is denied for someone else's
// step and ESLURM_INVALID_JOB_ID when the step is not here or does not
// answer.
func (m *Manager) withOwnedStep(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool, denied uint32, f func(ctx context.Context, c *stepapi.Conn) uint32) uint32 {
	cfg := m.cfg()
	ref := stepapi.StepRef{StepID: id, Path: stepapi.SocketPath(cfg.SpoolDir, cfg.NodeName, id)}
	rc := uint32(slurmproto.ESlurmInvalidJobID)
	err := withStep(ctx, ref, func(ctx context.Context, c *stepapi.Conn) error {
		owner, err := c.UID(ctx)
		if err != nil {
			return err
		}
		if uid != owner && !privileged {
			m.log.Error("step request from a user who does not own the step", "step", id, "uid", uid, "owner", owner)
			rc = denied
			return nil
		}
		rc = f(ctx, c)
		return nil
	})
	if err != nil {
		m.log.Debug("step manager not reachable", "step", id, "error", err)
	}
	return rc
}

// ioKeyMin is SLURM_IO_KEY_SIZE: a shorter signature cannot be an io key.
const ioKeyMin = 8

// Reattach serves REQUEST_REATTACH_TASKS (sattach, req.c
// _rpc_reattach_tasks): the step manager connects its I/O to the client's
// io port and sends it task exits; the reply lists the local tasks.
func (m *Manager) Reattach(ctx context.Context, req *slurmproto.ReattachTasks, uid uint32, privileged bool, orig slurmproto.Addr) *slurmproto.ReattachTasksResponse {
	resp := &slurmproto.ReattachTasksResponse{NodeName: m.cfg().NodeName}
	// 22.05: the fake credential's signature; 24.11+: sattach's own key.
	key := req.Key()
	resp.RC = m.withOwnedStep(ctx, req.StepID, uid, privileged, uint32(syscall.EPERM), func(ctx context.Context, c *stepapi.Conn) uint32 {
		nodeID, err := c.NodeID(ctx)
		if err != nil {
			return slurmproto.ESlurmInvalidJobID
		}
		if req.Cred != nil && len(key) < ioKeyMin {
			m.log.Error("incorrect credential signature length", "step", req.StepID, "length", len(key))
			return slurmproto.SlurmError
		}
		// srun's ports for this node, at the address the request came from.
		port := func(ports []uint16) netip.AddrPort {
			if len(ports) == 0 {
				return orig.AddrPort
			}
			return netip.AddrPortFrom(orig.AddrPort.Addr(), ports[int(nodeID)%len(ports)])
		}
		r, err := c.Attach(ctx, port(req.IOPorts), port(req.RespPorts), key, uid)
		if err != nil {
			m.log.Debug("reattach", "step", req.StepID, "error", err)
			return slurmproto.ESlurmInvalidJobID
		}
		if r.RC == 0 {
			resp.LocalPIDs, resp.GTIDs, resp.Executables = r.PIDs, r.GTIDs, r.Executables
		}
		return uint32(r.RC)
	})
	return resp
}
