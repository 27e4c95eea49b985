//go:build linux

package stepd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/spank"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// A tasks step (REQUEST_LAUNCH_TASKS, what srun starts) runs this node's
// share of the step's tasks, forwards their I/O to srun, reports each
// exit to srun (MESSAGE_TASK_EXIT) and the step's end to slurmctld
// (REQUEST_STEP_COMPLETE):
//
//	serve ─▶ newTaskStep: decode, identity, env, socket ─▶ report/ack ─▶
//	runTasks: cgroup, I/O to srun, fork tasks, RESPONSE_LAUNCH_TASKS,
//	          wait ─▶ TASK_EXIT per status group ─▶ drain I/O ─▶ kill rest ─▶
//	          STEP_COMPLETE (retried) ─▶ close socket

// Named bounds of a tasks step.
const (
	// SrunMsgRetries is how often a message to srun is tried
	// (mgr.c _send_launch_resp / _send_exit_msg: 5 tries).
	SrunMsgRetries = 5
	// SrunMsgRetryDelay is the pause between those tries.
	SrunMsgRetryDelay = time.Second
	// IODrainTimeout bounds the wait for task output to reach srun after
	// the last task exited (children that keep a pipe open are cut off).
	IODrainTimeout = 10 * time.Second
	// ExitBatchWindow gathers task exits that happen together into one
	// MESSAGE_TASK_EXIT, as slurmstepd's wait loop does.
	ExitBatchWindow = 20 * time.Millisecond
)

// StepCompleteRetry is the schedule of REQUEST_STEP_COMPLETE (mgr.c
// _send_step_complete_msgs retries every RETRY_DELAY while no controller
// answers; bounded here to about an hour like the batch completion).
var StepCompleteRetry = RetrySchedule{Attempts: 241, Delay: 15 * time.Second}

// stepTask is one local task.
type stepTask struct {
	ltid, gtid  uint32
	pid         int
	exited      bool  // guarded by Step.mu
	status      int32 // raw wait status; guarded by Step.mu
	sent        bool  // exit reported to srun
	killedByCmd bool  // guarded by Step.mu
	argv0       string
}

// AddrCaller sends an RPC to an arbitrary address (srun's ports);
// internal/ctld.Client implements it.
type AddrCaller interface {
	CallAddr(ctx context.Context, host string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error)
}

// newTaskStep decodes REQUEST_LAUNCH_TASKS (as completed by slurmd-go:
// user name, gids, node CPUs and memory from the verified credential) and
// prepares the step record, environment and socket.
func newTaskStep(spec *stepapi.StartSpec, o Options, log hclog.Logger) (*Step, error) {
	b, err := slurmproto.DecodeBody(spec.ProtocolVersion, slurmproto.RequestLaunchTasks, spec.LaunchBody)
	if err != nil {
		return nil, failSetup(slurmproto.ESlurmdSetupEnvironmentError, "stepd: launch body: %w", err)
	}
	m := b.(*slurmproto.LaunchTasks)
	nodeID := spec.NodeIndex
	if nodeID < 0 || nodeID >= len(m.TasksToLaunch) || nodeID >= len(m.GlobalTaskIDs) {
		return nil, failSetup(slurmproto.ESlurmInvalidNodeName, "stepd: node index %d outside the step's %d nodes", nodeID, len(m.TasksToLaunch))
	}
	s := &Step{
		spec: spec, launch: m, opts: o, nodeID: nodeID,
		id:      m.StepID,
		state:   stepapi.StateStarting,
		stateCh: make(chan struct{}),
		uid:     m.UID, gid: m.GID,
		cwd:  slurmproto.CString(m.Cwd),
		cpus: m.NodeCPUs,
	}
	s.log = log.With("job_id", m.StepID.JobID, "step_id", m.StepID.StepID)
	s.userName = slurmproto.CString(m.UserName)
	if s.userName == "" {
		s.userName = proc.UserName(s.uid)
	}
	if c := m.Cred; c != nil {
		s.pwGecos, s.pwDir, s.pwShell = slurmproto.CString(c.PwGecos), slurmproto.CString(c.PwDir), slurmproto.CString(c.PwShell)
		s.grNames = c.GrNames
	}
	s.gids = m.Gids
	if len(s.gids) == 0 {
		s.gids = []uint32{s.gid}
	}
	s.jobMemMiB, s.stepMemMiB = m.JobMemLim, m.StepMemLim
	gtids := m.GlobalTaskIDs[nodeID]
	for i := 0; i < int(m.TasksToLaunch[nodeID]) && i < len(gtids); i++ {
		s.tasks = append(s.tasks, &stepTask{ltid: uint32(i), gtid: gtids[i]})
	}
	if len(s.tasks) == 0 {
		return nil, failSetup(slurmproto.ESlurmdSetupEnvironmentError, "stepd: no tasks to launch on node %d", nodeID)
	}
	s.env = Env(append([]string(nil), m.Env...))
	// req.c: SLURM_SRUN_COMM_HOST is the address the launch came from
	// (orig_addr, filled in by slurmd-go).
	if m.OrigAddr.AddrPort.IsValid() {
		s.env.Overwrite("SLURM_SRUN_COMM_HOST", m.OrigAddr.AddrPort.Addr().String())
	}
	// mpi_process_env: "none" is not left in the tasks' environment.
	if v, ok := s.env.Get("SLURM_MPI_TYPE"); ok && v == "none" {
		s.env.Unset("SLURM_MPI_TYPE")
	}
	// slurmstepd.c: an srun step's GRES variables are the step's (the
	// interactive step's the job's); each task's are narrowed in taskEnv.
	s.initGres(m.Cred, m.TresBind, m.AccelBindType)
	if g := s.gres; g != nil {
		if m.StepID.StepID == slurmproto.StepIDInteractive {
			g.node.JobEnv(&s.env, g.launch)
		} else {
			g.node.StepEnv(&s.env, g.launch)
		}
	}
	s.env.Overwrite("SLURM_TOPOLOGY_ADDR", spec.TopologyAddr)
	s.env.Overwrite("SLURM_TOPOLOGY_ADDR_PATTERN", spec.TopologyPattern)
	if err := s.listen(); err != nil {
		return nil, err
	}
	return s, nil
}

// srunHost is host:port of srun's port list entry for this node.
func (s *Step) srunHost(ports []uint16) (string, bool) {
	m := s.launch
	if len(ports) == 0 || !m.OrigAddr.AddrPort.IsValid() {
		return "", false
	}
	p := ports[s.nodeID%len(ports)]
	if p == 0 {
		return "", false
	}
	return netip.AddrPortFrom(m.OrigAddr.AddrPort.Addr(), p).String(), true
}

// runTasks is job_manager for a tasks step.
// run has made this process a child subreaper already.
func (s *Step) runTasks() {
	s.reaper = proc.NewReaper()
	defer s.reaper.Stop()

	s.makeCgroup()
	// task_cgroup_devices: the interactive step, as a batch step, is
	// confined at the job level only.
	s.confineDevices(s.id.StepID == slurmproto.StepIDInteractive)
	rc, exits := s.forkTasks()
	if rc != 0 && s.spankFailed {
		// job_manager: exits recorded while the fork-all failed (24.11's
		// failed spank_user) reach srun before the abnormal launch reply.
		for s.sendPendingExits() > 0 {
		}
	}
	s.sendLaunchResponse(rc)
	from := "STARTING"
	if rc == 0 {
		s.setState(stepapi.StateRunning)
		s.logStateChange(from, "RUNNING")
		from = "RUNNING"
		s.waitTasks(exits)
	} else {
		// Nothing runs: tell srun that every task "exited" with the
		// launch error so it does not wait for them (not after a plugin
		// stack failure: stock's tasks then have no exit to report).
		s.mu.Lock()
		for _, t := range s.tasks {
			if !t.exited && !s.spankFailed {
				t.exited, t.status = true, int32(rc)<<8
			}
		}
		s.mu.Unlock()
	}
	// mgr.c job_manager: ending, every process killed and the I/O drained
	// before srun hears of the last exits; a kill request that srun (-K)
	// sends on an exit then writes no "CANCELLED" line to its stderr.
	s.setState(stepapi.StateEnding)
	s.logStateChange(from, "ENDING")
	// The lines of stock's step_terminate_monitor and switch plugin, as it
	// kills what is left of the step.
	s.stepdLog(logDebug2, "step_terminate_monitor will run for %d secs", int(s.unkillableTimeout().Seconds()))
	s.killAll()
	s.stepdLog(logDebug, "signaling condition")
	s.stepdLog(logDebug2, "step_terminate_monitor is stopping")
	if s.noneHookLogs() {
		s.stepdLog(logDebug2, "switch/none: switch_p_job_postfini: Sending SIGKILL to pgid %d", os.Getpid())
	}
	if s.spec.ProtocolVersion >= slurmproto.Version2411 {
		// acct_gather_profile_endpoll without a profile plugin running.
		s.stepdLog(logDebug2, "acct_gather_profile_startpoll: poll already ended!")
	}
	s.logStateChange("ENDING", "ENDING")
	s.stepdLog(logDebug, "Waiting for IO")
	s.stepdLog(logDebug, "Closing debug channel")
	s.closeIO(IODrainTimeout)
	s.finiSpank()
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		// 26.05 tells slurmctld first (stepd_send_step_complete_msgs,
		// then stepd_send_pending_exit_msgs): the next srun cannot ask
		// for a step before slurmctld knows this one ended.
		s.stepComplete()
		for s.sendPendingExits() > 0 {
		}
	} else {
		for s.sendPendingExits() > 0 {
		}
		s.stepComplete()
	}
	s.mpiFini()
	s.closeSocket()
	s.removeDevices()
	if s.cg != nil {
		if err := s.cg.Remove(); err != nil {
			s.log.Warn("cgroup removal", "error", err)
		}
	}
	s.log.Info("done with step")
}

// forkTasks starts every local task through the task helper. It returns a
// non-zero rc if the launch failed (then no task runs) and a channel of
// task exits.
func (s *Step) forkTasks() (uint32, <-chan taskExit) {
	// Steps keep SLURM_UMASK in their environment (set_umask).
	umask := s.umaskFromEnv()
	var nice *int
	if s.spec.PropagatePrioProcess != 0 {
		nice = s.prioProcess()
	}
	self, err := s.opts.selfPath()
	if err != nil {
		s.log.Error("cannot find own binary", "error", err)
		return slurmproto.ESlurmdExecveFailed, nil
	}
	if err := s.setupIO(umask); err != nil {
		s.log.Error("IO setup failed", "error", err)
		return slurmproto.ESlurmdIOError, nil
	}
	s.jobLogInit()
	s.stepdLog(logDebug, "IO handler started pid=%d", os.Getpid())
	s.sayUnprovided()
	// mgr.c _fork_all_tasks: the step manager's own chdir as the user
	// says so on the step's stderr first; each task then says it again.
	var chdirErr error
	if err := proc.DoAs(proc.Cred{UID: s.uid, GID: s.gid, Groups: s.gids}, umask, func() error {
		chdirErr = syscall.Chdir(s.cwd) // on this thread only
		return nil
	}); err != nil {
		s.log.Warn("cannot check the working directory as the user", "error", err)
	} else if chdirErr != nil {
		s.errorLine("couldn't chdir to `%s': %s: going to /tmp instead", s.cwd, strerror(chdirErr))
	}
	// mgr.c job_manager: the MPI plugin's servers start before the first
	// fork, and its per-task files are closed here once all are forked.
	if !s.mpiPrefork() {
		return slurmproto.SlurmError, nil
	}
	defer s.mpiAfterFork()
	if s.spankStep() {
		// mgr.c: spank_init before the fork-all, spank_user after the chdir.
		gtids := make([]uint32, len(s.tasks))
		for i, t := range s.tasks {
			gtids[i] = t.gtid
		}
		if rc, ok := s.startSpank(spank.ModeTasks, gtids); !ok {
			s.closeUnstartedStdio()
			return rc, nil
		}
		if debug := s.parallelDebug(); debug {
			s.log.Warn("parallel debug: tasks started by spank-runner are not stopped at exec")
		}
	}
	s.stepdLog(logVerbose, "starting %d tasks", len(s.tasks))
	exits := make(chan taskExit, len(s.tasks))
	pgid := 0
	// Each helper waits for its config before it execs; all are released
	// once every task is forked (mgr.c's fork-all-then-exec barrier), so the
	// first task, whose process group the others join, cannot have exited
	// yet: setpgid to a vanished group fails with EPERM.
	type release struct {
		t    *stepTask
		w    *os.File
		cfg  []byte
		exit <-chan proc.Exit
		stop <-chan proc.Exit // parallel debug: the stop at exec
	}
	debug := s.parallelDebug() && s.spank == nil
	var spankExits map[int]chan proc.Exit
	if s.spank != nil {
		spankExits = s.spankExitChans(len(s.tasks))
	}
	// A debugged task's tracer is the thread that forked it (pdebug_linux.go).
	defer debugThread(debug)()
	var releases []release
	abort := func() {
		for _, r := range releases {
			r.w.Close()
		}
		s.killStarted()
	}
	for i, t := range s.tasks {
		files, err := s.taskStdio(i)
		if err != nil {
			s.log.Error("task stdio", "task", t.gtid, "error", err)
			abort()
			return slurmproto.ESlurmdIOError, nil
		}
		cfgR, cfgW, err := os.Pipe()
		if err != nil {
			closeAll(files)
			abort()
			return slurmproto.ESlurmdExecveFailed, nil
		}
		// The MPI plugin's files follow the config pipe (fd 3).
		mpiEnv, mpiFiles, err := s.mpiTask(t, taskConfigFD+1)
		if err != nil {
			s.log.Error("MPI task setup", "task", t.gtid, "error", err)
			cfgR.Close()
			cfgW.Close()
			closeAll(files)
			abort()
			return slurmproto.SlurmError, nil
		}
		// Every task joins the first task's process group (mgr.c
		// _fork_all_tasks), so that a terminal signal reaches all. With a
		// PTY task 0 leads its own session, where no other task can join
		// its group: as slurmstepd, the others stay in the step manager's.
		ts := taskSpawn{local: i, files: append(append(files[:], cfgR), mpiFiles...), pgid: pgid, traced: debug}
		switch {
		case s.pty != nil && i == 0:
			ts.setsid, ts.ctty = true, true
		case s.pty != nil:
			ts.pgid = -1
		}
		if s.spank != nil {
			ts.env = s.taskEnv(t, 0)
		}
		sp, err := s.spawnTask(self, ts, spankExits[i])
		cfgR.Close()
		closeAll(files)
		if err != nil {
			cfgW.Close()
			s.log.Error("task fork", "task", t.gtid, "error", err)
			abort()
			return slurmproto.ESlurmdExecveFailed, nil
		}
		pid := sp.pid
		if pgid == 0 {
			pgid = pid
		}
		s.mu.Lock()
		t.pid = pid
		if i == 0 {
			s.pid = pid
		}
		s.mu.Unlock()
		if err := s.placeTask(int(t.ltid), pid, s.id.StepID == slurmproto.StepIDInteractive); err != nil {
			// proctrack's or task/cgroup's failure stops the launch.
			s.log.Error("task placement", "task", t.gtid, "error", err)
			cfgW.Close()
			abort()
			return slurmproto.ESlurmdExecveFailed, nil
		}
		tc := s.stepTaskConfig(t, pid, umask, nice)
		// mpi_g_slurmstepd_task runs last in exec_task's setup: its
		// variables win.
		env := Env(tc.Env)
		for _, kv := range mpiEnv {
			k, v, _ := strings.Cut(kv, "=")
			env.Overwrite(k, v)
		}
		tc.Env = env
		for i := range mpiFiles {
			tc.KeepFDs = append(tc.KeepFDs, taskConfigFD+1+i)
		}
		b, _ := json.Marshal(tc)
		releases = append(releases, release{t: t, w: cfgW, cfg: b, exit: sp.exit, stop: sp.stop})
		s.stepdLog(logVerbose, "task %d (%d) started %s", t.gtid, pid, eventTimestamp(time.Now()))
	}
	if s.noneHookLogs() {
		// mgr.c _fork_all_tasks: the task plugin's affinity hooks, per task.
		for range releases {
			for _, hook := range []string{"task_p_pre_set_affinity", "task_p_set_affinity", "task_p_post_set_affinity"} {
				s.stepdLog(logDebug, "task/none: %s: %s: StepId=%s", hook, hook, stepIDString(s.id))
			}
		}
	}
	for i, r := range releases {
		if err := s.releaseTask(i, r.w, r.cfg); err != nil {
			// A required plugin's task_post_fork failed: the launch fails.
			s.log.Error("release task", "task", r.t.gtid, "error", err)
			abort()
			return slurmproto.SlurmError, nil
		}
	}
	if debug {
		// mgr.c _fork_all_tasks: each task stopped for the debugger before
		// srun hears of the launch; one that ends first fails the launch.
		deadline := time.Now().Add(DebugStopTimeout)
		for _, r := range releases {
			onSignal := func(tid int, sig syscall.Signal) {
				s.log.Debug("parallel debug: signal before the exec, delivered", "task", r.t.gtid, "tid", tid, "signal", sig)
			}
			if e, err := traceProcess(r.t.pid, r.stop, r.exit, deadline, onSignal); err != nil {
				var ns *errTaskNotStopped
				if errors.As(err, &ns) {
					for _, l := range ns.lines {
						s.errorLine("%s", l)
					}
				} else {
					s.errorLine("%s", err)
				}
				s.log.Error("parallel debug: task not stopped at exec", "task", r.t.gtid, "pid", r.t.pid, "error", err)
				if e != nil {
					s.mu.Lock()
					r.t.exited, r.t.status = true, int32(e.Status)
					s.mu.Unlock()
				}
				s.killStarted()
				return slurmproto.ESlurmdExecveFailed, nil
			}
		}
	}
	for _, r := range releases {
		go func(t *stepTask, ch <-chan proc.Exit) {
			exits <- taskExit{t: t, e: <-ch}
		}(r.t, r.exit)
	}
	return 0, exits
}

type taskExit struct {
	t *stepTask
	e proc.Exit
}

func closeAll(files [3]*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// killStarted kills the tasks started so far after a failed launch.
func (s *Step) killStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		if t.pid > 0 {
			_ = syscall.Kill(t.pid, syscall.SIGKILL)
		}
	}
}

// stepTaskConfig is what the task helper needs for one task.
func (s *Step) stepTaskConfig(t *stepTask, pid, umask int, nice *int) taskConfig {
	m := s.launch
	argv := append([]string(nil), m.Argv...)
	if m.Flags&slurmproto.LaunchMultiProg != 0 {
		argv = multiProgArgv(argv, t.gtid)
	}
	env := s.taskEnv(t, pid)
	search := ""
	if len(argv) > 0 {
		if !strings.Contains(argv[0], "/") {
			search = argv[0]
		}
		argv[0] = resolvePath(argv[0], env, s.cwd)
		if strings.HasSuffix(argv[0], "/") {
			// srun --bcast=<dir>/: the copy slurmd wrote under its per-node name.
			argv[0] += stepapi.BcastFileName(s.id.JobID, s.id.StepID, s.spec.NodeName)
		}
		s.mu.Lock()
		t.argv0 = argv[0] // for sattach's reply
		s.mu.Unlock()
	}
	return taskConfig{
		Mode: modeJob, NodeName: s.spec.NodeName, Timestamped: s.timestamped(), JobID: s.id.JobID,
		UID: s.uid, GID: s.gid, Groups: s.gids,
		Cwd: s.cwd, Argv: argv, Env: env, Search: search,
		Umask: umask, Nice: nice, Propagate: s.propagate(),
		StepMemMiB: s.stepMemMiB, VSizeFactor: s.spec.VSizeFactor,
		TaskProlog: s.spec.TaskProlog, NoTmpdir: t.ltid != 0,
		UserTaskProlog: slurmproto.CString(m.TaskProlog),
		LogLevel:       s.stderrLevel(), LogTimestamp: s.spec.ProtocolVersion >= slurmproto.Version2605,
		StepID: stepIDString(s.id), TaskID: t.gtid,
		TaskNone: s.noneHookLogs(), MPINone: s.noneHookLogs() && mpiNone(m.MPIPluginID),
		PrlimitLogs:   s.spec.ProtocolVersion >= slurmproto.Version2411,
		ParallelDebug: s.parallelDebug(),
	}
}

// parallelDebug: srun launched the step for a parallel debugger.
func (s *Step) parallelDebug() bool {
	return s.launch != nil && s.launch.Flags&slurmproto.LaunchParallelDebug != 0
}

// taskEnv is exec_task's setup_env for a step task.
func (s *Step) taskEnv(t *stepTask, pid int) []string {
	m := s.launch
	gtids := make([]string, len(s.tasks))
	for i, x := range s.tasks {
		gtids[i] = strconv.FormatUint(uint64(x.gtid), 10)
	}
	host := ""
	if m.OrigAddr.AddrPort.IsValid() {
		host = m.OrigAddr.AddrPort.Addr().String()
	}
	commPort := uint16(0)
	if len(m.RespPorts) > 0 {
		commPort = m.RespPorts[s.nodeID%len(m.RespPorts)]
	}
	env := StepTaskEnv(s.env, StepEnvConfig{
		// slurmstepd_job.c: the extern step never gets oom_kill_step.
		ReleaseEnv:     ReleaseEnvOf(s.spec.ProtocolVersion, m.Cred, m.OOMKillStep && m.StepID.StepID != slurmproto.StepIDExtern),
		ConfFile:       s.spec.ConfFile,
		CPUsOnNode:     s.cpus,
		JobID:          s.id.JobID,
		StepID:         s.id.StepID,
		TaskPID:        pid,
		NodeID:         uint32(s.nodeID),
		ProcID:         t.gtid,
		LocalID:        t.ltid,
		GTIDs:          strings.Join(gtids, ","),
		CommPort:       commPort,
		LaunchHost:     host,
		UID:            s.uid,
		GID:            s.gid,
		UserName:       s.userName,
		WorkingCluster: s.spec.WorkingCluster,
		NodeName:       s.spec.NodeName,
		TresBind:       slurmproto.CString(m.TresBind),
		TresFreq:       slurmproto.CString(m.TresFreq),
	})
	// task.c exec_task: an srun step with a binding request has each
	// task's GRES variables narrowed to its devices.
	if g := s.gres; g != nil && m.StepID.StepID != slurmproto.StepIDInteractive && g.launch.HasTaskBinding() {
		e := Env(env)
		g.node.TaskEnv(&e, g.launch, int(t.ltid))
		env = e
	}
	return env
}

// resolvePath is slurmstepd's _build_path: a command without a slash is
// looked up in the task's PATH (then the working directory); what is not
// found is left for execve to fail on, as stock reports it.
func resolvePath(cmd string, env []string, cwd string) string {
	if cmd == "" || strings.Contains(cmd, "/") {
		if cmd != "" && !filepath.IsAbs(cmd) {
			return filepath.Join(cwd, cmd)
		}
		return cmd
	}
	path := ""
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			path = e[5:]
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, cmd)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	if st, err := os.Stat(filepath.Join(cwd, cmd)); err == nil && st.Mode().IsRegular() {
		return filepath.Join(cwd, cmd)
	}
	return cmd
}

// multiProgArgv is multi_prog_get_argv: with --multi-prog srun sends
// argv[0] the file name, argv[1] the file's contents and then its other
// arguments, which every task's line gets appended. A line is "<ranks>
// <prog> <args>" with %t (task id) and %o (offset in the rank list), 'quotes',
// backslash escapes and continuations, and # comments. No matching line
// gives nil (the task fails: no executable program).
func multiProgArgv(argv []string, gtid uint32) []string {
	if len(argv) < 2 {
		return nil
	}
	lines := strings.Split(argv[1], "\n")
	for n := 0; n < len(lines); n++ {
		line := lines[n]
		p := strings.TrimLeft(line, " \t\r\v\f")
		if p == "" || p[0] == '#' {
			continue
		}
		spec, rest, ok := strings.Cut(strings.Map(func(r rune) rune {
			if r == '\t' {
				return ' '
			}
			return r
		}, p), " ")
		if !ok {
			return nil // "Invalid MPMD configuration line"
		}
		offset, in := rankOffset(spec, gtid)
		if !in {
			// Skip the continuation lines of this entry too.
			for strings.HasSuffix(lines[n], "\\") && n+1 < len(lines) {
				n++
			}
			continue
		}
		out, ok := multiProgArgs(rest, lines[n+1:], gtid, offset)
		if !ok {
			return nil
		}
		return append(out, argv[2:]...)
	}
	return nil
}

// multiProgArgs splits one line's program and arguments as
// multi_prog_get_argv does; more holds the following lines for
// continuations.
func multiProgArgs(s string, more []string, gtid uint32, offset int) ([]string, bool) {
	var out []string
	var cur strings.Builder
	have := false
	flush := func() {
		if have {
			out = append(out, cur.String())
			cur.Reset()
			have = false
		}
	}
	s = strings.TrimLeft(s, " \t")
	for i := 0; ; {
		if i >= len(s) {
			break
		}
		switch c := s[i]; {
		case c == '%':
			have = true
			if i+1 < len(s) {
				switch s[i+1] {
				case 't':
					cur.WriteString(strconv.FormatUint(uint64(gtid), 10))
				case 'o':
					cur.WriteString(strconv.Itoa(offset))
				}
			}
			i += 2
		case c == '\\':
			have = true
			if i+1 < len(s) {
				cur.WriteByte(s[i+1])
				i += 2
			} else if len(more) > 0 {
				s, more, i = more[0], more[1:], 0
			} else {
				i++
			}
		case c == '\'':
			have = true
			end := strings.IndexByte(s[i+1:], '\'')
			for end < 0 {
				// A quote left open at a continued line goes on.
				if !strings.HasSuffix(s, "\\") || len(more) == 0 {
					return nil, false
				}
				cur.WriteString(s[i+1 : len(s)-1])
				s, more, i = more[0], more[1:], -1
				end = strings.IndexByte(s, '\'')
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case c == ' ' || c == '\t' || c == '\r':
			flush()
			i++
		default:
			have = true
			cur.WriteByte(c)
			i++
		}
	}
	flush()
	return out, len(out) > 0
}

// rankMatches tells whether gtid is in a multi-prog rank list ("*", "0-3,5").
func rankMatches(spec string, gtid uint32) bool {
	_, ok := rankOffset(spec, gtid)
	return ok
}

// rankOffset is multi_prog.c _in_range: whether gtid is in the rank list,
// and its position among the listed ranks (%o).
func rankOffset(spec string, gtid uint32) (int, bool) {
	if spec == "*" {
		return int(gtid), true
	}
	offset := 0
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 32); err != nil || b < a {
				continue
			}
		}
		if uint64(gtid) >= a && uint64(gtid) <= b {
			return offset + int(uint64(gtid)-a), true
		}
		offset += int(b - a + 1)
	}
	return 0, false
}

// sendLaunchResponse is _send_launch_resp: RESPONSE_LAUNCH_TASKS to srun.
func (s *Step) sendLaunchResponse(rc uint32) {
	host, ok := s.srunHost(s.launch.RespPorts)
	if !ok {
		return
	}
	s.stepdLog(logDebug, "Sending launch resp rc=%d", rc)
	resp := &slurmproto.LaunchTasksResponse{StepID: s.id, ReturnCode: rc, NodeName: s.spec.NodeName}
	s.mu.Lock()
	for _, t := range s.tasks {
		resp.LocalPIDs = append(resp.LocalPIDs, uint32(t.pid))
		resp.TaskIDs = append(resp.TaskIDs, t.gtid)
	}
	s.mu.Unlock()
	s.toSrun(host, resp)
}

// toSrun sends one message to srun with SrunMsgRetries tries.
func (s *Step) toSrun(host string, body slurmproto.Body) {
	caller, ok := s.opts.Ctld.(AddrCaller)
	if !ok {
		s.log.Error("no client for srun messages")
		return
	}
	var err error
	for i := 0; i < SrunMsgRetries; i++ {
		if i > 0 {
			time.Sleep(SrunMsgRetryDelay)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.callBudget())
		_, err = caller.CallAddr(ctx, host, body, s.uid)
		cancel()
		if err == nil {
			return
		}
	}
	s.log.Error("message to srun failed", "type", body.MsgType().String(), "host", host, "error", err)
}

// waitTasks collects exits until every task is gone, reporting them to
// srun in groups of equal status.
func (s *Step) waitTasks(exits <-chan taskExit) {
	left := len(s.tasks)
	for left > 0 {
		x := <-exits
		s.recordTaskExit(x)
		s.stepTaskExited(x.t)
		s.stepTaskEpilogs(x.t)
		s.spankTaskExit(x.t.ltid)
		left--
		// Gather exits that arrive together (one wait3 round in stock).
		timer := time.NewTimer(ExitBatchWindow)
	gather:
		for left > 0 {
			select {
			case x := <-exits:
				s.recordTaskExit(x)
				s.stepTaskExited(x.t)
				s.stepTaskEpilogs(x.t)
				s.spankTaskExit(x.t.ltid)
				left--
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		// Partial reports only: the last one waits until the step is
		// ending and its I/O is drained (runTasks), as in stock, so a
		// signal that srun sends on it finds the step ending.
		if left > 0 {
			for s.sendPendingExits() > 0 {
			}
		}
	}
	s.checkOOM()
}

// stepTaskEpilogs runs, for one exited task, srun's --task-epilog and then
// slurm.conf's TaskEpilog as the user with the task's environment (mgr.c
// _wait_for_any_task; stock's two error messages are crossed, kept so).
func (s *Step) stepTaskEpilogs(t *stepTask) {
	user := slurmproto.CString(s.launch.TaskEpilog)
	if user == "" && s.spec.TaskEpilog == "" {
		return
	}
	env := Env(s.taskEnv(t, 0))
	env.Setenvf("SLURM_SCRIPT_CONTEXT", "epilog_task")
	env.Setenvf("SLURMD_NODENAME", s.spec.NodeName)
	if user != "" {
		s.runEpilogScript(user, "TaskEpilog", env, UserTaskEpilogTimeout)
	}
	if s.spec.TaskEpilog != "" {
		s.runEpilogScript(s.spec.TaskEpilog, "--task-epilog", env, 0)
	}
}

// stepTaskExited is the task plugin's hook for one ended task.
func (s *Step) stepTaskExited(t *stepTask) {
	if s.noneHookLogs() {
		s.stepdLog(logDebug, "task/none: task_p_post_term: task_p_post_term: StepId=%s, task %d", stepIDString(s.id), t.gtid)
	}
}

func (s *Step) recordTaskExit(x taskExit) {
	s.mu.Lock()
	x.t.exited, x.t.status = true, int32(x.e.Status)
	allDone := true
	for _, t := range s.tasks {
		allDone = allDone && t.exited
	}
	if allDone {
		s.exited, s.estatus = true, int32(x.e.Status)
	}
	s.mu.Unlock()
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		s.stepdLog(logDebug2, "_wait_for_any_task: found ended task with primary pid %d ", x.t.pid)
	}
	s.logTaskExit(x.t.gtid, x.t.pid, x.e.Status)
}

// sendPendingExits is stepd_send_pending_exit_msgs: one MESSAGE_TASK_EXIT
// for the unreported tasks sharing the first one's status.
func (s *Step) sendPendingExits() int {
	s.mu.Lock()
	var ids []uint32
	var status int32
	set := false
	for _, t := range s.tasks {
		if !t.exited || t.sent {
			continue
		}
		if !set {
			status, set = t.status, true
		} else if t.status != status {
			continue
		}
		ids = append(ids, t.gtid)
		t.sent = true
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return 0
	}
	msg := &slurmproto.TaskExit{ReturnCode: uint32(status), TaskIDs: ids, StepID: s.id}
	for _, host := range s.exitTargets() {
		s.toSrun(host, msg)
	}
	return len(ids)
}

// exitTargets are srun's response address and those of attached sattach
// clients.
func (s *Step) exitTargets() []string {
	var out []string
	if h, ok := s.srunHost(s.launch.RespPorts); ok {
		out = append(out, h)
	}
	s.mu.Lock()
	out = append(out, s.attachedResp...)
	s.mu.Unlock()
	return out
}

// stepRC is mgr.c _get_exit_code.
func (s *Step) stepRC() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc := slurmproto.NoVal
	for _, t := range s.tasks {
		if t.killedByCmd {
			continue
		}
		if syscall.WaitStatus(t.status).Signaled() {
			rc = uint32(t.status)
			break
		}
		if t.status&0xff == int32(slurmproto.SigOOM) {
			rc = uint32(t.status)
		} else if rc&0xff != uint32(slurmproto.SigOOM) {
			// Stock takes MAX against step_complete.step_rc (0 here),
			// i.e. the last task's status.
			rc = max(0, uint32(t.status))
		}
	}
	if rc == slurmproto.NoVal && len(s.tasks) > 0 {
		rc = uint32(s.tasks[0].status)
	}
	if s.oom {
		rc = uint32(slurmproto.SigOOM)
	}
	return rc
}

// stepComplete sends REQUEST_STEP_COMPLETE for this node directly to
// slurmctld (what stock does for steps under 7 nodes; always correct).
func (s *Step) stepComplete() { s.sendStepComplete(s.stepRC()) }

// sendStepComplete sends REQUEST_STEP_COMPLETE for this node with rc.
func (s *Step) sendStepComplete(rc uint32) {
	body := &slurmproto.StepComplete{
		StepID:     s.id,
		RangeFirst: uint32(s.nodeID),
		RangeLast:  uint32(s.nodeID),
		StepRC:     rc,
		JobAcct:    emptyJobAcct(s.spec.ProtocolVersion, s.spec.TRESIDs),
	}
	sched := StepCompleteRetry
	if s.opts.CompleteRetry.Attempts > 0 {
		sched = s.opts.CompleteRetry
	}
	reply, err := s.callCtld(sched, "step complete", body, 0)
	if err != nil {
		s.log.Error("unable to send step complete message", "error", err)
		return
	}
	if rc := replyRC(reply); rc != 0 {
		s.log.Info("slurmctld refused step completion", "rc", slurmproto.RCName(rc))
	}
}

// emptyJobAcct is the accounting record a 24.11 or 26.05 step manager
// sends with its completion under jobacct_gather/none (measured:
// jobacctinfo_create's record, zero CPU times, every TRES usage
// INFINITE64); 22.05 sends none. Without the registration's TRES ids it
// sends none either, which slurmctld takes as well.
func emptyJobAcct(version uint16, tresIDs []uint32) *slurmproto.JobAcct {
	if version < slurmproto.Version2411 || len(tresIDs) == 0 {
		return nil
	}
	j := &slurmproto.JobAcct{TRESIDs: slices.Clone(tresIDs)}
	for i := range j.Usage {
		j.Usage[i] = make([]uint64, len(tresIDs))
		for k := range j.Usage[i] {
			j.Usage[i][k] = slurmproto.Infinite64
		}
	}
	return j
}

// stepName is the step's cgroup directory name ("step_0", "batch").
func (s *Step) stepName() string {
	switch s.id.StepID {
	case slurmproto.StepIDBatch:
		return "batch"
	case slurmproto.StepIDExtern:
		return "extern"
	case slurmproto.StepIDInteractive:
		return "interactive"
	}
	return fmt.Sprintf("step_%d", s.id.StepID)
}
