//go:build linux

package stepd

import (
	"os/exec"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/spank"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// externArgv is what the extern step holds the job's container with before
// 26.05, as stock does (mgr.c _spawn_job_container: SLEEP_CMD "sleep
// 100000000", run as root in its own session).
var externArgv = []string{"/bin/sleep", "100000000"}

// newExternStep prepares the job's extern step (PrologFlags=Contain) from
// REQUEST_LAUNCH_PROLOG, as req.c _spawn_prolog_stepd does: one task per
// node (local id 0, global id the node's index, pid -1), no I/O, the job's user
// and memory from the credential.
func newExternStep(spec *stepapi.StartSpec, o Options, log hclog.Logger) (*Step, error) {
	b, err := slurmproto.DecodeBody(spec.ProtocolVersion, slurmproto.RequestLaunchProlog, spec.LaunchBody)
	if err != nil {
		return nil, failSetup(slurmproto.ESlurmdSetupEnvironmentError, "stepd: launch prolog body: %w", err)
	}
	m := b.(*slurmproto.LaunchProlog)
	id := slurmproto.StepID{JobID: m.JobID, StepID: slurmproto.StepIDExtern, StepHetComp: slurmproto.NoVal}
	nodeID := spec.NodeIndex // -1: the daemon found no such node in m.Nodes
	if nodeID < 0 {
		return nil, failSetup(slurmproto.ESlurmInvalidNodeName, "stepd: node %s is not in the job's nodes %q", spec.NodeName, m.Nodes)
	}
	s := &Step{
		spec: spec, prolog: m, opts: o, nodeID: nodeID,
		id:      id,
		state:   stepapi.StateStarting,
		stateCh: make(chan struct{}),
		uid:     m.UID, gid: m.GID,
		cwd: slurmproto.CString(m.WorkDir),
		// The task is never forked: its pid stays -1 (stock's task info).
		tasks:        []*stepTask{{ltid: 0, gtid: uint32(nodeID), pid: -1}},
		adopted:      map[int]bool{},
		externKilled: make(chan struct{}),
	}
	s.log = log.With("job_id", m.JobID, "step_id", "extern")
	s.userName = slurmproto.CString(m.UserName)
	if c := m.Cred; c != nil {
		id.SLUID = c.StepID.SLUID
		s.id = id
		if s.userName == "" {
			s.userName = slurmproto.CString(c.PwName)
		}
		s.pwGecos, s.pwDir, s.pwShell = slurmproto.CString(c.PwGecos), slurmproto.CString(c.PwDir), slurmproto.CString(c.PwShell)
		s.gids, s.grNames = c.Gids, c.GrNames
		s.jobMemMiB, s.stepMemMiB = c.MemLimits(nodeID, nodeID)
	}
	if s.userName == "" {
		s.userName = proc.UserName(s.uid)
	}
	if len(s.gids) == 0 {
		s.gids = []uint32{s.gid}
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	return s, nil
}

// runExtern is _spawn_job_container: hold the container with a sleeping
// process until the job is killed, then kill everything in the step (the
// adopted processes too) and report the step's end to slurmctld.
func (s *Step) runExtern() {
	s.reaper = proc.NewReaper()
	defer s.reaper.Stop()
	s.makeCgroup()
	if s.spankStep() {
		// _spawn_job_container: spank_init first; a failure ends the step.
		if _, ok := s.startSpank(spank.ModeExtern, []uint32{uint32(s.nodeID)}); !ok {
			s.log.Error("_spawn_job_container: Plugin stack initialization failed.")
			s.setState(stepapi.StateEnding)
			s.finishExtern()
			return
		}
	}
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		// 26.05 holds no process: the step runs until it is killed
		// (mgr.c waits for SLURMSTEPD_STEP_CANCELLED), and listpids shows
		// only what joined it.
		if s.spank != nil {
			// _spawn_job_container: task_post_fork(-1) all the same.
			if err := s.spank.Extern(0); err != nil {
				s.log.Error("spank extern task post-fork failed", "error", err)
			}
		}
		s.setState(stepapi.StateRunning)
		s.log.Info("extern step running")
		<-s.externKilled
		s.setState(stepapi.StateEnding)
		s.finishExtern()
		return
	}

	cmd := exec.Command(externArgv[0], externArgv[1:]...)
	cmd.Args[0] = "sleep"
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	exitCh, err := s.reaper.Start(cmd)
	if err != nil {
		s.log.Error("extern step: cannot start the container process", "argv", externArgv, "error", err)
		s.setState(stepapi.StateEnding)
		s.finishExtern()
		return
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
	if s.cg != nil {
		if err := s.cg.AddPID(pid); err != nil {
			s.log.Error("extern step: unable to add pid to the step's cgroup", "pid", pid, "error", err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			s.recordExit(<-exitCh)
			s.setState(stepapi.StateEnding)
			s.finishExtern()
			return
		}
	}
	if s.spank != nil {
		if err := s.spank.Extern(pid); err != nil {
			s.log.Error("spank extern task post-fork failed", "error", err)
		}
	}
	s.setState(stepapi.StateRunning)
	s.log.Info("extern step running", "pid", pid)
	e := <-exitCh
	s.recordExit(e)
	s.log.Debug("extern step's container process exited", "status", uint32(e.Status))
	s.setState(stepapi.StateEnding)
	s.finishExtern()
}

// finishExtern kills what is left of the step (adopted logins included),
// sends REQUEST_STEP_COMPLETE and removes the socket and cgroup.
func (s *Step) finishExtern() {
	s.killAll()
	s.finiSpank()
	// The extern step's step_rc is never computed by stock: always 0.
	s.sendStepComplete(0)
	s.closeSocket()
	if s.cg != nil {
		if err := s.cg.Remove(); err != nil {
			s.log.Warn("cgroup removal", "error", err)
		}
	}
	s.log.Info("done with extern step")
}

// addExternPID is _handle_add_extern_pid_internal: pid (a login that
// pam_slurm_adopt lets in) joins the step, so that it is listed, counted in
// the job's processes and killed at the job's end. It is tracked by the
// step's cgroup where there is one, and by its pid and descendants always.
func (s *Step) addExternPID(pid int) int32 {
	if s.prolog == nil {
		s.log.Error("non-extern step given for add extern pid", "pid", pid)
		return -1
	}
	if pid <= 0 || !proc.Alive(pid) {
		s.log.Error("add extern pid: no such process", "pid", pid)
		return -1
	}
	if s.cg != nil {
		if err := s.cg.AddPID(pid); err != nil {
			s.log.Error("can't add pid to the extern step's cgroup", "pid", pid, "error", err)
			return -1
		}
	}
	s.mu.Lock()
	s.adopted[pid] = true
	s.mu.Unlock()
	s.log.Debug("add extern pid", "pid", pid)
	return 0
}

// adoptedPIDs are the live adopted processes and their descendants.
func (s *Step) adoptedPIDs() []int {
	s.mu.Lock()
	var roots []int
	for p := range s.adopted {
		if proc.Alive(p) {
			roots = append(roots, p)
		} else {
			delete(s.adopted, p)
		}
	}
	s.mu.Unlock()
	var out []int
	for _, p := range roots {
		if tree, err := proc.Tree(p, 0, 0); err == nil {
			out = append(out, tree...)
		}
	}
	return out
}
