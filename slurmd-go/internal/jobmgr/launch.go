package jobmgr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/credverify"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// LaunchTasks serves REQUEST_LAUNCH_TASKS (req.c _rpc_launch_tasks): it
// checks the requester and the credential, runs the Prolog on a job's
// first step, starts the step manager and returns the rc that srun gets
// once the step manager is ready (its socket exists).
func (m *Manager) LaunchTasks(ctx context.Context, version uint16, reqUID uint32, privileged bool, orig slurmproto.Addr, msg *slurmproto.LaunchTasks) (uint32, func(error)) {
	var recorded *credKey // the credential this request entered in the record
	rc := m.launchTasks(ctx, version, reqUID, privileged, orig, msg, &recorded)
	return rc, m.launchReplied(msg.StepID, rc, recorded)
}

// launchReplied is what req.c does once the launch's answer was or was not sent:
// unsent, the credential this request recorded is forgotten again (slurm_cred_rewind),
// so that srun may retry with it; sent for a successful launch, the record is saved so
// that a restarted daemon still refuses a replay (save_cred_state).
func (m *Manager) launchReplied(step slurmproto.StepID, rc uint32, recorded *credKey) func(error) {
	return func(err error) {
		if err != nil {
			m.log.Error("unable to send the launch reply", "job_id", step.JobID, "step_id", step.StepID, "rc", slurmproto.RCName(rc), "rewind", recorded != nil, "error", err)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		switch {
		case err != nil && recorded != nil:
			delete(m.creds, *recorded)
			m.saveStateLocked()
		case err == nil && rc == 0:
			m.saveStateLocked()
		}
	}
}

func (m *Manager) launchTasks(ctx context.Context, version uint16, reqUID uint32, privileged bool, orig slurmproto.Addr, msg *slurmproto.LaunchTasks, recorded **credKey) uint32 {
	cfg := m.cfg()
	log := m.log.With("job_id", msg.StepID.JobID, "step_id", msg.StepID.StepID)
	nodes, err := hostlist.Parse(slurmproto.CString(msg.CompleteNodelist))
	nodeID := -1
	if err == nil {
		nodeID = nodes.Find(cfg.NodeName)
	}
	if !privileged && reqUID != msg.UID {
		log.Error("launch task request from another uid", "uid", reqUID, "owner", msg.UID)
		return slurmproto.ESlurmUserIDMissing
	}
	if nodeID < 0 {
		log.Info("invalid node list", "node", cfg.NodeName, "nodes", msg.CompleteNodelist)
		return slurmproto.ESlurmInvalidNodeName
	}
	host := ""
	if orig.AddrPort.IsValid() {
		host = orig.AddrPort.Addr().String()
	}
	log.Info("launch task request", "uid", msg.UID, "gid", msg.GID, "host", host, "node_id", nodeID)
	// srun's tasks call back the address this request came from; the step
	// manager puts it in SLURM_SRUN_COMM_HOST.
	msg.OrigAddr = orig

	tasks := 0
	if nodeID < len(msg.TasksToLaunch) {
		tasks = int(msg.TasksToLaunch[nodeID])
	}
	seen := func(step slurmproto.StepID, ctime, expires time.Time) bool {
		if m.credSeen(step, ctime, expires) {
			return true
		}
		*recorded = &credKey{step: step, ctime: ctime.Unix()}
		return false
	}
	v := credverify.Verifier{Auth: m.auth, SlurmUserUID: cfg.Conf.SlurmUserID, Expire: cfg.Conf.AuthInfo.CredExpire, Seen: seen, Version: version}
	if lv, ok := m.auth.(credverify.LaunchVerifier); ok {
		v.Launch = lv
	}
	chk, err := v.Verify(ctx, msg.Cred, credverify.Want{Step: msg.StepID, UID: msg.UID, GID: msg.GID, NodeName: cfg.NodeName}, tasks, m.nodeCPUs())
	if err != nil {
		log.Error("invalid job credential", "requester_uid", reqUID, "host", host, "error", err)
		if credverify.AtUnpack(err) {
			return slurmproto.ESlurmProtocolIncompletePacket
		}
		return credverify.RC(err)
	}
	if rc := unsupportedStepFeature(log, cfg.Conf.File, msg); rc != 0 {
		return rc
	}
	c := msg.Cred
	msg.UserName = c.PwName
	if msg.UserName == "" {
		msg.UserName = proc.UserName(msg.UID)
	}
	if len(c.Gids) > 0 {
		msg.Gids = c.Gids
	}
	m.libdirFixup(version, msg)
	msg.NodeCPUs = uint16(chk.StepCPUs)
	msg.JobCoreSpec = c.JobCoreSpec
	if chk.JobMemMiB != 0 {
		msg.JobMemLim, msg.StepMemLim = chk.JobMemMiB, chk.StepMemMiB
	}

	j, revoked := m.incarnation(msg.StepID.JobID, msg.UID, msg.GID, c.CTime)
	if revoked {
		log.Error("job credential revoked")
		return credverify.RevokedRC(version)
	}
	if rc, ranHere := m.prologOnce(ctx, j, scriptJob{
		JobID: msg.StepID.JobID, HetJobID: msg.HetJobID, UID: msg.UID, GID: msg.GID,
		UserName: slurmproto.CString(c.PwName), WorkDir: msg.Cwd, Nodes: c.JobHostlist,
		Partition: c.JobPartition, AliasList: c.JobAliasList, SpankJobEnv: msg.SpankJobEnv, Cred: c,
	}); rc != 0 {
		if ranHere {
			m.mu.Lock()
			st := j.prologStatus
			m.mu.Unlock()
			log.Error("prolog failed", "status", st)
		}
		// srun hears of it first, then the node drains (_rpc_launch_tasks).
		defer m.prologFailed(rc, ranHere)
		return rc
	}
	body, err := slurmproto.EncodeBody(version, msg)
	if err != nil {
		log.Error("re-encode launch", "error", err)
		return slurmproto.SlurmError
	}
	spec := m.spec(stepapi.KindTasks, version, body)
	spec.NodeIndex = nodeID
	if _, err := stepapi.Launch(ctx, m.stepdPath, spec); err != nil {
		log.Error("step launch failed", "error", err)
		return stepapi.RC(err)
	}
	m.watchLaunch(version, c, msg.StepID, slurmproto.CString(msg.UserName), false)
	if m.revoked(msg.StepID.JobID) {
		log.Info("job killed while its step was starting")
		m.terminateSteps(ctx, msg.StepID.JobID)
	}
	return 0
}

// libdirFixup puts the step's --send-libs directories first in the tasks'
// LD_LIBRARY_PATH (_handle_libdir_fixup): 22.05 takes the first directory,
// 24.11 on all of them.
func (m *Manager) libdirFixup(version uint16, msg *slurmproto.LaunchTasks) {
	if m.libDirs == nil {
		return
	}
	dirs := m.libDirs(msg.UID, msg.StepID.JobID, msg.StepID.StepID)
	if len(dirs) == 0 {
		return
	}
	if version < slurmproto.Version2411 {
		dirs = dirs[:1]
	}
	path := strings.Join(dirs, ":")
	for i, e := range msg.Env {
		if v, ok := strings.CutPrefix(e, "LD_LIBRARY_PATH="); ok {
			msg.Env[i] = "LD_LIBRARY_PATH=" + path + ":" + v
			return
		}
	}
	msg.Env = append(msg.Env, "LD_LIBRARY_PATH="+path)
}

// unsupportedStepFeature refuses, with stock's error code and a log line
// naming the feature, a launch that asks for what the step manager does not
// do, rather than run it without: X11 forwarding (slurmctld sends it only
// with PrologFlags=X11, and it needs the extern step) and an OCI container where oci.conf configures them. Without
// oci.conf stock ignores --container too (slurmstepd.c: "containers are not
// configured on this node").
func unsupportedStepFeature(log hclog.Logger, confFile string, msg *slurmproto.LaunchTasks) uint32 {
	if msg.X11 != 0 {
		log.Error("X11 forwarding requested: slurmd-go has no extern step to forward it", "x11", msg.X11)
		return slurmproto.ESlurmX11NotAvail
	}
	if containerRefused(log, confFile, msg.Container) {
		return slurmproto.ESlurmContainerNotConfigured
	}
	return 0
}

// containerRefused reports whether a launch's --container must be refused:
// oci.conf turns OCI containers on, which slurmd-go does not run. Without
// oci.conf a container is ignored with stock's debug line.
func containerRefused(log hclog.Logger, confFile, container string) bool {
	c := slurmproto.CString(container)
	if c == "" {
		return false
	}
	oci := filepath.Join(filepath.Dir(confFile), ociConfName)
	if _, err := os.Stat(oci); err == nil {
		log.Error("OCI container requested: slurmd-go does not run containers", "container", c, "oci_conf", oci)
		return true
	}
	log.Debug("container requested but containers are not configured on this node", "container", c)
	return false
}

// ociConfName is the file beside slurm.conf that turns on OCI containers.
const ociConfName = "oci.conf"
