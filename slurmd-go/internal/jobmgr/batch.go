package jobmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fname"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Job state flags of REQUEST_JOB_REQUEUE (slurm.h).
const (
	jobLaunchFailed uint32 = 1 << 8
	jobGetenvFailed uint32 = 1 << 9 // 26.05: the held job's reason names the user environment
	jobRequeueHold  uint32 = 1 << 11
	// killArrayTask is KILL_ARRAY_TASK (24.11 on) of REQUEST_KILL_JOB.
	killArrayTask uint16 = 1 << 1
)

// AcceptBatch does the checks slurmd makes before it answers a batch
// launch; a non-zero rc is the answer. A zero rc means the caller replies
// RC 0 and the launch goes on in the background (StartBatch).
func (m *Manager) AcceptBatch(msg *slurmproto.BatchJobLaunch) uint32 {
	noContainer := containerRefused(m.log.With("job_id", msg.JobID), m.cfg().Conf.File, msg.Container)
	j, revoked := m.incarnation(msg.JobID, msg.UID, msg.GID, credTime(msg.Cred))
	m.mu.Lock()
	defer m.mu.Unlock()
	if revoked {
		m.log.Error("job already killed, do not launch batch job", "job_id", msg.JobID)
		return slurmproto.ESlurmdCredentialRevoked
	}
	if j.launching > 0 || len(m.stepsOfLocked(msg.JobID, slurmproto.StepIDBatch)) > 0 {
		m.log.Error("job already running, do not launch second copy", "job_id", msg.JobID)
		return slurmproto.ESlurmDuplicateJobID
	}
	if noContainer {
		// slurmctld ends a batch job whose launch is refused ("Killing
		// non-startable batch job"); the user reads why in its stderr,
		// written apart from the answer (the work directory may be slow).
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.jobStderrLine(msg, "slurmd-go: error: --container: this node has oci.conf, and slurmd-go does not run OCI containers; job not started\n")
		}()
		return slurmproto.ESlurmContainerNotConfigured
	}
	j.launching++
	return 0
}

func (m *Manager) stepsOfLocked(jobID, stepID uint32) []stepapi.StepRef {
	var out []stepapi.StepRef
	for _, r := range m.stepsOf(jobID) {
		if r.StepID.StepID == stepID {
			out = append(out, r)
		}
	}
	return out
}

// StartBatch is the rest of the batch launch once its answer (RC 0) went
// out: replyErr says whether slurmctld got it. Delivered, it runs Prolog
// (unless PrologFlags=Alloc ran it already) and starts the step manager;
// failures are reported to slurmctld as slurmd does (requeue held, node
// drained for Prolog failures). Undelivered, slurmctld no longer waits for
// this launch (its agent gave up and requeues it): as stock, nothing runs,
// the job is requeued held as a failed launch and the next registration
// carries SLURM_COMMUNICATIONS_SEND_ERROR (req.c _rpc_batch_job).
func (m *Manager) StartBatch(version uint16, raw []byte, msg *slurmproto.BatchJobLaunch, replyErr error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() {
			if j := m.lookup(msg.JobID); j != nil {
				m.mu.Lock()
				j.launching--
				m.mu.Unlock()
			}
		}()
		ctx := context.Background()
		if replyErr != nil {
			m.log.Error("Could not confirm batch launch, aborting request", "job_id", msg.JobID, "error", replyErr)
			m.launchFailed(ctx, msg.JobID, credStep(msg.Cred), slurmproto.SlurmCommunicationsSendError)
			if m.reg != nil {
				m.reg.RegisterWithStatus(slurmproto.SlurmCommunicationsSendError)
			}
			return
		}
		rc, prologRan := m.startBatch(ctx, version, raw, msg)
		if rc != 0 {
			m.launchFailed(ctx, msg.JobID, credStep(msg.Cred), rc)
			m.prologFailed(rc, prologRan)
		}
	}()
}

// startBatch returns the launch's result and whether this launch ran the
// Prolog.
func (m *Manager) startBatch(ctx context.Context, version uint16, raw []byte, msg *slurmproto.BatchJobLaunch) (uint32, bool) {
	log := m.log.With("job_id", msg.JobID)
	j := m.lookup(msg.JobID)
	if m.cfg().Conf.PrologFlags&slurmconf.PrologAlloc != 0 {
		// The Prolog belongs to REQUEST_LAUNCH_PROLOG, which may still be
		// on its way (_wait_for_request_launch_prolog).
		if !m.waitPrologStarted(ctx, j, 2*m.cfg().MessageTimeout()) {
			log.Error("REQUEST_LAUNCH_PROLOG never came, giving up")
			return slurmproto.ESlurmdPrologFailed, false
		}
	}
	if rc, ranHere := m.prologOnce(ctx, j, scriptJob{
		JobID: msg.JobID, HetJobID: msg.HetJobID, UID: msg.UID, GID: msg.GID,
		UserName: credUser(msg.Cred), WorkDir: msg.WorkDir, Nodes: msg.Nodes,
		Partition: msg.Partition, AliasList: msg.AliasList, SpankJobEnv: msg.SpankJobEnv, Cred: msg.Cred,
	}); rc != 0 {
		if !ranHere {
			// The Prolog failed in REQUEST_LAUNCH_PROLOG (PrologFlags=Alloc),
			// which tells slurmctld; the job's credential is revoked, and
			// stock's batch launch stops there without a word to slurmctld
			// (a requeue of its own would race REQUEST_COMPLETE_PROLOG).
			log.Info("job already killed, do not launch batch job")
			return 0, false
		}
		// 22.05's _prolog_error writes the failure into the job's stderr;
		// 24.11 dropped that (the job gets no output file).
		if m.protocol() < slurmproto.Version2411 {
			m.mu.Lock()
			st := j.prologStatus
			m.mu.Unlock()
			m.prologError(msg, st)
		}
		return rc, ranHere
	}
	// The Prolog has run, so a cancellation this node decided at
	// REQUEST_LAUNCH_PROLOG is known: the script is not started, and its
	// output tells the user why.
	if note := m.takeCancelNote(msg.JobID); note != "" {
		log.Info("job cancelled by this node, not launching")
		m.jobStderrLine(msg, "slurmd-go: error: "+note+"\n")
		return 0, false
	}
	envCtx, endWait := m.jobContext(ctx, j)
	userEnv, rc := m.userEnv(envCtx, msg)
	endWait()
	if rc != 0 {
		return rc, false
	}
	if m.revoked(msg.JobID) {
		log.Info("job killed while its prolog ran, not launching")
		return 0, false
	}
	spec := m.spec(stepapi.KindBatch, version, raw)
	// The batch step runs on the job's first node.
	spec.NodeIndex = max(m.nodeIndex(msg.Nodes), 0)
	spec.UserEnv = userEnv
	log.Info("launching batch job", "uid", msg.UID)
	if _, err := stepapi.Launch(ctx, m.stepdPath, spec); err != nil {
		log.Error("batch job launch failed", "error", err)
		return stepapi.RC(err), false
	}
	m.watchLaunch(version, msg.Cred, slurmproto.StepID{JobID: msg.JobID, StepID: slurmproto.StepIDBatch}, credUser(msg.Cred), true)
	if m.revoked(msg.JobID) {
		log.Info("job killed while its launch was in progress")
		m.terminateSteps(ctx, msg.JobID)
	}
	return 0, false
}

// spec fills what every step manager needs from the daemon's config.
func (m *Manager) spec(kind stepapi.Kind, version uint16, raw []byte) stepapi.StartSpec {
	cfg := m.cfg()
	c := cfg.Conf
	// SLURM_WORKING_CLUSTER names the controller's address (its ControlAddr).
	ctldHost := "localhost"
	if len(c.SlurmctldHost) > 0 {
		ctldHost = c.SlurmctldHost[0].Addr
		if ctldHost == "" {
			ctldHost = c.SlurmctldHost[0].Name
		}
	}
	selectID := slurmproto.SelectPluginConsTres
	switch c.SelectType {
	case "select/cons_res":
		selectID = slurmproto.SelectPluginConsRes
	case "select/linear":
		selectID = slurmproto.SelectPluginLinear
	}
	// A step manager logs at the daemon's level (conf->debug_level, which
	// scontrol setdebug changes).
	level := int(c.SlurmdDebug) + cfg.Flags.Verbose
	if l := m.logLevel.Load(); l >= 0 {
		level = int(l)
	}
	return stepapi.StartSpec{
		Kind:                          kind,
		NodeName:                      cfg.NodeName,
		Hostname:                      cfg.Hostname,
		ClusterName:                   c.ClusterName,
		ConfFile:                      cfg.Flags.ConfFile,
		SpoolDir:                      cfg.SpoolDir,
		CtldHosts:                     cfg.CtldHosts,
		MessageTimeout:                cfg.MessageTimeout(),
		AuthType:                      c.AuthType,
		MungeSocket:                   c.AuthInfo.Socket,
		MungeTTL:                      c.AuthInfo.TTL,
		MungeAllowReplay:              cfg.MultipleSlurmd,
		BlockNullHash:                 c.CommunicationParameters.BlockNullHash(),
		BlockZeroHash:                 c.CommunicationParameters.BlockZeroHash(),
		SlurmUserUID:                  c.SlurmUserID,
		KillWait:                      c.KillWait,
		JobFileAppend:                 c.JobFileAppend,
		PropagateResourceLimits:       c.PropagateResourceLimits,
		PropagateResourceLimitsExcept: c.PropagateResourceLimitsExcept,
		TaskProlog:                    c.TaskProlog,
		TaskPlugin:                    c.TaskPlugin,
		UnkillableStepTimeout:         c.UnkillableStepTimeout,
		TaskEpilog:                    c.TaskEpilog,
		PlugStack:                     c.PlugStackConfig,
		PluginDir:                     c.PluginDir,
		TmpFS:                         cfg.TmpFS,
		LogFile:                       cfg.LogFile,
		LogLevel:                      level,
		SyslogLevel:                   syslogLevel(c.SlurmdSyslogDebug, cfg.Flags.Foreground, level, cfg.LogFile),
		WorkingCluster:                workingCluster(version, c.ClusterName, ctldHost, c.SlurmctldPort, selectID),
		TopologyAddr:                  cfg.NodeName,
		TopologyPattern:               "node",
		// Every job is tracked in a cgroup where the machine offers one,
		// whatever ProctrackType says: no child escapes a kill.
		NoCgroup:        false,
		ProctrackCgroup: c.ProctrackType == "proctrack/cgroup",
		// Memory is capped only where stock slurmd caps it.
		IgnoreMemoryLimit: !(strings.Contains(c.TaskPlugin, "task/cgroup") && cfg.ConstrainRAMSpace()),
		GresTypes:         c.GresTypes,
		GresRecords:       m.nodeGres(),
		ConstrainDevices:  strings.Contains(c.TaskPlugin, "cgroup") && cfg.Cgroup != nil && cfg.Cgroup.ConstrainDevices,
		ProtocolVersion:   version,
		TRESIDs:           m.tresIDs(),
		LaunchBody:        raw,
	}
}

// nodeGres is the node's GRES records, none before SetGresRecords.
func (m *Manager) nodeGres() []gres.Record {
	if m.gresRecords == nil {
		return nil
	}
	return m.gresRecords()
}

// syslogLevel is slurmstepd's syslog level from the conf slurmd passes
// (slurmstepd.c _init_from_slurmd).
func syslogLevel(syslogDebug slurmconf.LogLevel, foreground bool, level int, logFile string) int {
	switch {
	case syslogDebug != slurmconf.LogEnd:
		return int(syslogDebug)
	case foreground:
		return int(slurmconf.LogQuiet)
	case level > int(slurmconf.LogQuiet) && logFile == "":
		return level
	}
	return int(slurmconf.LogFatal)
}

// tresIDs are the ids of the TRES of the last registration's answer.
func (m *Manager) tresIDs() []uint32 {
	if m.reg == nil {
		return nil
	}
	var ids []uint32
	for _, t := range m.reg.TRES() {
		ids = append(ids, t.ID)
	}
	return ids
}

// workingCluster is SLURM_WORKING_CLUSTER of every task as 22.05's
// setup_env sets it; 24.11 no longer sets it in jobs (only salloc does).
func workingCluster(version uint16, cluster, host string, port uint16, selectID uint32) string {
	if version >= slurmproto.Version2411 {
		return ""
	}
	return fmt.Sprintf("%s:%s:%d:%d:%d", cluster, host, port, version, selectID)
}

func credUser(c *slurmproto.Cred) string {
	if c == nil {
		return ""
	}
	return slurmproto.CString(c.PwName)
}

func (m *Manager) revoked(jobID uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[jobID]
	return j != nil && !j.revokedAt.IsZero()
}

// credTime is when slurmctld made a credential (zero without one).
func credTime(c *slurmproto.Cred) time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.CTime
}

// waitPrologStarted waits until some request started the job's Prolog.
func (m *Manager) waitPrologStarted(ctx context.Context, j *job, d time.Duration) bool {
	deadline := time.Now().Add(d)
	t := time.NewTicker(StepsGonePoll)
	defer t.Stop()
	for {
		m.mu.Lock()
		started := j.prologDone != nil
		m.mu.Unlock()
		if started {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// prologOnce runs Prolog on the first launch of a job on this node; later
// launches wait for it. With PrologFlags=Alloc it already ran (or runs) on
// REQUEST_LAUNCH_PROLOG. ranHere says this call ran it. A failed Prolog
// revokes the job, so nothing of it starts here.
func (m *Manager) prologOnce(ctx context.Context, j *job, sj scriptJob) (rc uint32, ranHere bool) {
	m.mu.Lock()
	first := j.prologDone == nil
	if first {
		j.prologDone = make(chan struct{})
	}
	done := j.prologDone
	m.mu.Unlock()
	if !first {
		select {
		case <-done:
		case <-ctx.Done():
			return slurmproto.ESlurmdPrologFailed, false
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return j.prologRC, false
	}
	st := m.runJobScripts(ctx, "prolog", sj)
	if st != 0 {
		rc = slurmproto.ESlurmdPrologFailed
		m.log.Error("prolog failed", "job_id", sj.JobID, "status", fmt.Sprintf("%d:%d", exitOf(st), sigOf(st)))
	}
	m.mu.Lock()
	j.prologRC, j.prologStatus = rc, st
	if rc != 0 {
		j.revokedAt = time.Now()
		m.saveStateLocked()
	}
	m.mu.Unlock()
	close(done)
	return rc, true
}

// prologFailed drains the node (a registration carrying
// ESLURMD_PROLOG_FAILED, or ESLURMD_SETUP_ENVIRONMENT_ERROR as slurmd's
// _rpc_batch_job sends it) after the caller has told slurmctld about the job,
// in stock's order: from 24.11 slurmctld requeues the job on that
// registration, and a REQUEST_COMPLETE_PROLOG that came later would no
// longer set the job's exit code.
func (m *Manager) prologFailed(rc uint32, ranHere bool) {
	if (ranHere && rc == slurmproto.ESlurmdPrologFailed) || rc == slurmproto.ESlurmdSetupEnvironmentError {
		m.reg.RegisterWithStatus(rc)
	}
}

// prologError tells the job's owner, in the job's stderr file, that the
// Prolog failed (_prolog_error); the file is opened as the user.
func (m *Manager) prologError(msg *slurmproto.BatchJobLaunch, status uint32) {
	m.jobStderrLine(msg, fmt.Sprintf("Error running slurm prolog: %d\n", exitOf(status)))
}

// jobStderrLine appends line to the batch job's stderr file, as its user.
func (m *Manager) jobStderrLine(msg *slurmproto.BatchJobLaunch, line string) {
	j := fname.JobFor(msg, credUser(msg.Cred), m.cfg().Hostname, slurmproto.CString(msg.WorkDir))
	_, _, errName := fname.BatchStdio(msg, j)
	gids := msg.Gids
	if msg.Cred != nil && len(msg.Cred.Gids) > 0 {
		gids = msg.Cred.Gids
	}
	err := proc.DoAs(proc.Cred{UID: msg.UID, GID: msg.GID, Groups: gids}, -1, func() error {
		f, err := os.OpenFile(errName, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(line)
		return errors.Join(err, f.Close())
	})
	if err != nil {
		m.log.Error("unable to write to the job's stderr", "job_id", msg.JobID, "path", errName, "error", err)
	}
}

func exitOf(st uint32) int { return int(st>>8) & 0xff }
func sigOf(st uint32) int  { return int(st & 0x7f) }

// launchFailed tells slurmctld a launch failed (_launch_job_fail): the job
// is requeued and held, which is what slurmctld does with it too.
func (m *Manager) launchFailed(ctx context.Context, jobID uint32, step slurmproto.StepID, rc uint32) {
	if rc == slurmproto.ESlurmdCredentialRevoked {
		return
	}
	// 26.05 names the job by the failed launch's step id.
	req := &slurmproto.JobRequeue{JobID: jobID, StepID: step, Flags: requeueFlags(m.protocol(), rc, m.cfg().Conf.SchedulerParameters)}
	reply, err := m.ctldCall(ctx, req)
	if err != nil {
		m.log.Error("cannot requeue job after launch failure", "job_id", jobID, "rc", slurmproto.RCName(rc), "error", err)
		return
	}
	r, ok := reply.(*slurmproto.ReturnCode)
	if !ok || r.RC == 0 {
		return
	}
	if r.RC != slurmproto.ESlurmDisabled && r.RC != slurmproto.ESlurmBatchOnly {
		m.log.Error("slurmctld refused to requeue job after launch failure", "job_id", jobID, "rc", slurmproto.RCName(r.RC))
		return
	}
	// Not requeueable (--no-requeue, JobRequeue=0): the job is cancelled,
	// with a line in its output when the prolog failed, as stock.
	m.log.Info(fmt.Sprintf("Could not launch job %d and not able to requeue it, cancelling job", jobID))
	note := ""
	if rc == slurmproto.ESlurmdPrologFailed {
		note = "Prolog failure on node " + m.cfg().NodeName
	}
	m.cancelJob(ctx, jobID, note)
}

// cancelNoteTTL bounds how long a cancellation's reason waits for the
// job's batch launch (an interactive job has none).
const cancelNoteTTL = 10 * time.Minute

type cancelNote struct {
	text string
	at   time.Time
}

func (m *Manager) putCancelNote(jobID uint32, text string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for id, n := range m.cancelNotes {
		if now.Sub(n.at) > cancelNoteTTL {
			delete(m.cancelNotes, id)
		}
	}
	m.cancelNotes[jobID] = cancelNote{text: text, at: now}
}

func (m *Manager) takeCancelNote(jobID uint32) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.cancelNotes[jobID]
	delete(m.cancelNotes, jobID)
	return n.text
}

// cancelJob tells the job's user note (REQUEST_JOB_NOTIFY: srun and salloc
// print it, a batch job gets it in its stderr once its script runs) unless
// it is empty, then cancels the job as scancel would (REQUEST_KILL_JOB),
// each request with its own bound.
func (m *Manager) cancelJob(ctx context.Context, jobID uint32, note string) {
	// refused is the error of a request slurmctld could not be asked or
	// answered with a code (ESLURM_ALREADY_DONE: the job ended already).
	refused := func(body slurmproto.Body) error {
		reply, err := m.ctldCall(ctx, body)
		if err != nil {
			return err
		}
		if r, ok := reply.(*slurmproto.ReturnCode); ok && r.RC != 0 && r.RC != slurmproto.ESlurmAlreadyDone {
			return fmt.Errorf("slurmctld answered %s", slurmproto.RCName(r.RC))
		}
		return nil
	}
	if note != "" {
		n := &slurmproto.JobNotify{StepID: slurmproto.StepID{JobID: jobID, StepID: slurmproto.NoVal, StepHetComp: slurmproto.NoVal}, Message: note}
		if err := refused(n); err != nil {
			m.log.Error("cannot notify job", "job_id", jobID, "note", note, "error", err)
		}
	}
	kill := &slurmproto.KillJobRequest{StepID: slurmproto.StepID{JobID: slurmproto.NoVal, StepID: slurmproto.NoVal, StepHetComp: slurmproto.NoVal},
		SJobID: strconv.FormatUint(uint64(jobID), 10), Signal: uint16(syscall.SIGKILL)}
	if m.protocol() >= slurmproto.Version2411 {
		kill.Flags = killArrayTask // this task of an array job only
	}
	if err := refused(kill); err != nil {
		m.log.Error("cannot cancel job", "job_id", jobID, "error", err)
	}
}

// ctldCall sends body to slurmctld and returns its answer, bounded as each
// of stock's RPCs (2x MessageTimeout).
func (m *Manager) ctldCall(ctx context.Context, body slurmproto.Body) (slurmproto.Body, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*m.cfg().MessageTimeout())
	defer cancel()
	return m.ctld.Call(cctx, body, authUIDAny)
}

// requeueFlags are the flags of the REQUEST_JOB_REQUEUE that reports a
// failed batch launch (_launch_job_fail). 22.05 holds the job itself
// unless SchedulerParameters has nohold_on_prolog_fail (then JOB_PENDING,
// 0); from 24.11 slurmctld decides and the node sends JOB_LAUNCH_FAILED
// alone; 26.05 marks a failed login environment ("user env retrieval
// failed requeued held").
func requeueFlags(version uint16, rc uint32, schedParams string) uint32 {
	if version < slurmproto.Version2411 {
		if strings.Contains(strings.ToLower(schedParams), "nohold_on_prolog_fail") {
			return 0
		}
		return jobRequeueHold | jobLaunchFailed
	}
	f := jobLaunchFailed
	if version >= slurmproto.Version2605 && rc == slurmproto.ESlurmdSetupEnvironmentError {
		f |= jobGetenvFailed
	}
	return f
}

// LaunchProlog serves REQUEST_LAUNCH_PROLOG (PrologFlags=Alloc): run
// Prolog now, start the job's extern step after it with
// PrologFlags=Contain (req.c _rpc_prolog), and report both with
// REQUEST_COMPLETE_PROLOG. raw is the received body, which the extern
// step decodes again.
func (m *Manager) LaunchProlog(version uint16, raw []byte, msg *slurmproto.LaunchProlog) {
	j, revoked := m.incarnation(msg.JobID, msg.UID, msg.GID, credTime(msg.Cred))
	if revoked {
		m.log.Info("job already killed, not running its prolog", "job_id", msg.JobID)
		return
	}
	// slurmctld hands the job's step management to its first node's extern
	// step: its steps would wait for a step manager that is not there. The
	// first node cancels the job with the reason instead of leaving it
	// hanging; the prolog and extern step still run first as for any job, so
	// that the cancelled job ends as a cancelled job does (no Prolog failure,
	// which would drain the node), and its batch script is not started
	// (startBatch).
	note := ""
	if len(msg.StepmgrJob) > 0 && m.nodeIndex(msg.Nodes) == 0 {
		note = "slurmd-go on node " + m.cfg().NodeName + " does not serve step management (--stepmgr, SlurmctldParameters=enable_stepmgr): job cancelled"
		m.log.Error("job asks for step management on this node, which slurmd-go does not serve: cancelling it", "job_id", msg.JobID)
		m.putCancelNote(msg.JobID, note)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx := context.Background()
		rc, ranHere := m.prologOnce(ctx, j, scriptJob{
			JobID: msg.JobID, HetJobID: msg.HetJobID, UID: msg.UID, GID: msg.GID,
			UserName: msg.UserName, WorkDir: msg.WorkDir, Nodes: msg.Nodes,
			AliasList: msg.AliasList, SpankJobEnv: msg.SpankJobEnv, Cred: msg.Cred,
		})
		if rc == 0 && ranHere && m.cfg().Conf.PrologFlags&slurmconf.PrologContain != 0 {
			rc = m.startExtern(ctx, version, raw, msg)
		}
		if m.cfg().Conf.PrologFlags&slurmconf.PrologNoHold == 0 {
			body := &slurmproto.CompleteProlog{JobID: msg.JobID, StepID: credStep(msg.Cred), NodeName: m.cfg().NodeName, PrologRC: rc}
			if err := m.durableRetry(ctx, "REQUEST_COMPLETE_PROLOG", fmt.Sprintf("complete_prolog.%d", msg.JobID), body); err != nil {
				m.log.Error("slurmctld never took the prolog result", "job_id", msg.JobID, "error", err)
			}
		}
		if rc != 0 {
			m.launchFailed(ctx, msg.JobID, credStep(msg.Cred), rc)
			m.prologFailed(rc, ranHere)
			return
		}
		if note != "" {
			// After the Prolog, so that the job's end (its Epilog) comes
			// after it, as for any cancelled job.
			m.cancelJob(ctx, msg.JobID, note)
		}
	}()
}

// startExtern starts the job's extern step (_spawn_prolog_stepd): a job
// killed meanwhile gets none, silently; a failed start fails the launch.
func (m *Manager) startExtern(ctx context.Context, version uint16, raw []byte, msg *slurmproto.LaunchProlog) uint32 {
	log := m.log.With("job_id", msg.JobID)
	if m.revoked(msg.JobID) {
		log.Info("job already killed, do not launch extern step")
		return 0
	}
	spec := m.spec(stepapi.KindExtern, version, raw)
	spec.NodeIndex = m.nodeIndex(msg.Nodes)
	if _, err := stepapi.Launch(ctx, m.stepdPath, spec); err != nil {
		log.Error("extern step launch failed", "error", err)
		return stepapi.RC(err)
	}
	m.watchLaunch(version, msg.Cred, slurmproto.StepID{JobID: msg.JobID, StepID: slurmproto.StepIDExtern}, credUser(msg.Cred), true)
	if m.revoked(msg.JobID) {
		log.Info("job killed while its extern step was starting")
		m.terminateSteps(ctx, msg.JobID)
	}
	return 0
}

// credStep is a credential's step id (what 26.05 names a job by in the
// messages that used to carry the job id); zero without a credential.
func credStep(c *slurmproto.Cred) slurmproto.StepID {
	if c == nil {
		return slurmproto.StepID{}
	}
	return c.StepID
}
