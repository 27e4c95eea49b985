//go:build linux

package stepd

import (
	"encoding/json"
	"errors"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/spank"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/cparse"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/cgroup"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named bounds of the job's end.
const (
	// ContainerWaitTimeout bounds waiting for every process of the step to
	// die after SIGKILL (proctrack_g_wait).
	ContainerWaitTimeout = 2 * time.Minute
	// SocketDrainTimeout bounds waiting for open socket connections before
	// the step manager exits (STEPD_MESSAGE_COMP_WAIT).
	SocketDrainTimeout = 3 * time.Second
)

// run is job_manager plus batch_finish and stepd_cleanup: it runs the
// script, reports its end to slurmctld and tears the step down.
func (s *Step) run() {
	if err := proc.SetOOMScoreAdj(0, -1000); err != nil {
		s.log.Debug("oom_score_adj", "error", err)
	}
	if err := proc.SetChildSubreaper(); err != nil {
		s.log.Warn("cannot become child subreaper", "error", err)
	}
	if s.launch != nil {
		s.runTasks()
		return
	}
	if s.prolog != nil {
		s.runExtern()
		return
	}
	s.reaper = proc.NewReaper()
	defer s.reaper.Stop()

	rc := s.jobManager()
	s.setState(stepapi.StateEnding)
	s.killAll()
	s.finiSpank()
	s.batchFinish(rc)
	s.closeSocket()
	s.removeDevices()
	if s.cg != nil {
		if err := s.cg.Remove(); err != nil {
			s.log.Warn("cgroup removal", "error", err)
		}
	}
	s.log.Info("done with job")
}

// jobManager starts the script and waits for it; it returns the slurm_rc
// for the completion message (non-zero only when the launch itself failed,
// which drains the node).
func (s *Step) jobManager() uint32 {
	s.makeCgroup()
	s.confineDevices(true)

	// set_umask: SLURM_UMASK applies to the stdio files and the job, and
	// is removed from a batch job's environment.
	umask := s.umaskFromEnv()
	s.env.Unset("SLURM_UMASK")
	var nice *int
	if s.spec.PropagatePrioProcess != 0 {
		nice = s.prioProcess()
	}

	files, chdirErr, err := s.openStdio(umask)
	if err != nil {
		// IO setup failed: the script never runs and its "exit status" is
		// the error code; slurm_rc stays 0 so the node is not drained.
		s.log.Error("IO setup failed", "error", err)
		s.mu.Lock()
		s.exited, s.estatus = true, slurmproto.ESlurmdIOError
		s.mu.Unlock()
		return 0
	}
	s.mu.Lock()
	s.stderr = files[2]
	s.mu.Unlock()
	if chdirErr != nil {
		// The parent's chdir as the user (mgr.c _fork_all_tasks); the
		// task tries again and says so a second time, as stock does.
		s.errorLine("couldn't chdir to `%s': %s: going to /tmp instead", s.cwd, strerror(chdirErr))
	}
	defer files[0].Close()
	defer files[1].Close()

	if s.spankStep() {
		// mgr.c: spank_init, then spank_user after the chdir.
		if rc, ok := s.startSpank(spank.ModeBatch, []uint32{0}); !ok {
			return rc
		}
	}
	self, err := s.opts.selfPath()
	if err != nil {
		s.log.Error("cannot find own binary", "error", err)
		return slurmproto.ESlurmdExecveFailed
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return slurmproto.ESlurmdExecveFailed
	}
	ts := taskSpawn{files: []*os.File{files[0], files[1], files[2], cfgR}, setsid: true}
	var spankExit <-chan proc.Exit
	if s.spank != nil {
		spankExit = s.spankExitChans(1)[0]
		ts.env = s.taskConfig(0, umask, nice).Env
	}
	sp, err := s.spawnTask(self, ts, spankExit)
	cfgR.Close()
	if err != nil {
		cfgW.Close()
		s.errorLine("child fork: %s", strerror(err))
		return slurmproto.ESlurmdExecveFailed
	}
	pid, exitCh := sp.pid, sp.exit
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
	s.log.Info("task 0 started", "pid", pid)

	if err := s.placeTask(0, pid, true); err != nil {
		// proctrack_g_add's or task/cgroup's failure aborts the launch.
		s.log.Error("task placement", "pid", pid, "error", err)
		cfgW.Close()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		s.recordExit(<-exitCh)
		return slurmproto.ESlurmdExecveFailed
	}
	cfg := s.taskConfig(pid, umask, nice)
	b, _ := json.Marshal(cfg)
	if err := s.releaseTask(0, cfgW, b); err != nil {
		// A required plugin's task_post_fork failed: the script never runs.
		s.log.Error("release task", "error", err)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		s.recordExit(<-exitCh)
		return slurmproto.SlurmError
	}
	s.setState(stepapi.StateRunning)

	e := <-exitCh
	s.recordExit(e)
	s.log.Info("task 0 exited", "status", uint32(e.Status))
	s.taskEpilog()
	s.spankTaskExit(0)
	s.checkOOM()
	return 0
}

func (s *Step) recordExit(e proc.Exit) {
	s.mu.Lock()
	s.exited, s.estatus = true, int32(e.Status)
	s.mu.Unlock()
}

// makeCgroup creates the step's cgroup and sets the job's memory limit
// from the credential; failures leave tracking to session and pgid.
func (s *Step) makeCgroup() {
	if s.spec.NoCgroup {
		return
	}
	root := s.spec.CgroupRoot
	if root == "" {
		root = "tiee/" + s.spec.NodeName
	}
	m, err := s.opts.cgroupManager(root)
	if err != nil {
		s.log.Warn("no cgroups", "error", err)
	}
	if m == nil || m.Kind() == cgroup.KindNone {
		return
	}
	cg, err := m.Create(s.id.JobID, s.stepName())
	if err != nil {
		s.log.Warn("cgroup create", "error", err)
		return
	}
	s.cg = cg
	s.log.Debug("cgroup", "kind", m.Kind(), "path", cg.Path())
	if s.spec.IgnoreMemoryLimit || s.jobMemMiB == 0 {
		return
	}
	if err := cg.SetMemoryLimit(s.jobMemMiB << 20); err != nil {
		lvl := s.log.Warn
		if errors.Is(err, cgroup.ErrNotSupported) {
			lvl = s.log.Debug
		}
		lvl("memory limit not enforced", "mib", s.jobMemMiB, "error", err)
	}
}

// prioProcess is mgr.c _set_prio_process: the nice value to run at, taken
// out of the environment.
func (s *Step) prioProcess() *int {
	v, ok := s.env.Get("SLURM_PRIO_PROCESS")
	prio := 0
	if !ok {
		s.errorLine("Couldn't find SLURM_PRIO_PROCESS in environment")
	} else {
		s.env.Unset("SLURM_PRIO_PROCESS")
		prio = cparse.Atoi(v)
	}
	if s.spec.PropagatePrioProcess == 2 { // PROP_PRIO_NICER
		if cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
			// The raw syscall returns 20-nice.
			prio = max(prio, 20-cur+1)
		}
	}
	return &prio
}

// propagate is which limits slurm.conf's PropagateResourceLimits passes
// on (all of them when the setting cannot be parsed, as its default).
func (s *Step) propagate() map[string]bool {
	prop, err := proc.ParsePropagate(s.spec.PropagateResourceLimits, s.spec.PropagateResourceLimitsExcept)
	if err != nil {
		s.log.Error("bad PropagateResourceLimits", "error", err)
		prop, _ = proc.ParsePropagate("", "")
	}
	return prop
}

// umaskFromEnv is set_umask's value: SLURM_UMASK in octal (strtol), -1
// when absent.
func (s *Step) umaskFromEnv() int {
	v, ok := s.env.Get("SLURM_UMASK")
	if !ok {
		return -1
	}
	if m, err := strconv.ParseInt(v, 8, 32); err == nil {
		return int(m)
	}
	m, _ := cStrtol8(v)
	return m
}

// outputFlags are the open flags of an output file: open_mode, or
// JobFileAppend for mode 0, decides append or truncate (io.c).
func (s *Step) outputFlags(openMode uint8) int {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	switch openMode {
	case slurmproto.OpenModeAppend:
	case slurmproto.OpenModeTruncate:
		flags |= os.O_TRUNC
	default:
		if !s.spec.JobFileAppend {
			flags |= os.O_TRUNC
		}
	}
	return flags
}

// openOutput opens a task's output file. From 24.11 a file whose
// directory is missing gets it made first (io.c: mkdirpath(name, 0755) on
// ENOENT, then the open again), as the user whose identity the caller has.
func (s *Step) openOutput(name string, flags int) (*os.File, error) {
	f, err := os.OpenFile(name, flags, 0o666)
	if err != nil && errors.Is(err, fs.ErrNotExist) && s.spec.ProtocolVersion >= slurmproto.Version2411 {
		if dir := filepath.Dir(name); dir != "" && dir != "." {
			_ = os.MkdirAll(dir, 0o755)
		}
		f, err = os.OpenFile(name, flags, 0o666)
	}
	return f, err
}

// openStdio opens the task's stdin, stdout and stderr as the user (file
// system identity and umask of the user on a private thread), with
// open_mode or JobFileAppend deciding append or truncate (io.c).
func (s *Step) openStdio(umask int) (files [3]*os.File, chdirErr, err error) {
	flags := s.outputFlags(s.msg.OpenMode)
	err = proc.DoAs(proc.Cred{UID: s.uid, GID: s.gid, Groups: s.gids}, umask, func() error {
		var err error
		if files[0], err = os.OpenFile(s.inName, os.O_RDONLY, 0); err != nil {
			return err
		}
		if files[1], err = s.openOutput(s.outName, flags); err != nil {
			files[0].Close()
			return err
		}
		if files[2], err = s.openOutput(s.errName, flags); err != nil {
			files[0].Close()
			files[1].Close()
			return err
		}
		chdirErr = syscall.Chdir(s.cwd) // on this thread only
		return nil
	})
	return files, chdirErr, err
}

// taskConfig is what the task helper needs for the batch script.
func (s *Step) taskConfig(pid, umask int, nice *int) taskConfig {
	argv := append([]string(nil), s.msg.Argv...)
	if len(argv) == 0 {
		argv = []string{s.script}
	} else {
		argv[0] = s.script
	}
	env := BatchTaskEnv(s.env, TaskEnvConfig{
		ReleaseEnv:     ReleaseEnvOf(s.spec.ProtocolVersion, s.msg.Cred, s.msg.OOMKillStep),
		ConfFile:       s.spec.ConfFile,
		CPUsOnNode:     s.cpus,
		Overcommit:     s.msg.Overcommit != 0,
		JobID:          s.id.JobID,
		TaskPID:        pid,
		GTIDs:          "0",
		RestartCount:   s.msg.RestartCnt,
		UID:            s.uid,
		GID:            s.gid,
		UserName:       s.userName,
		WorkingCluster: s.spec.WorkingCluster,
		NodeName:       s.spec.NodeName,
	})
	return taskConfig{
		Mode: modeJob, NodeName: s.spec.NodeName, Timestamped: s.timestamped(), JobID: s.id.JobID,
		UID: s.uid, GID: s.gid, Groups: s.gids,
		Cwd: s.cwd, Argv: argv, Env: env,
		Umask: umask, Nice: nice, Propagate: s.propagate(),
		StepMemMiB: s.stepMemMiB, VSizeFactor: s.spec.VSizeFactor,
		TaskProlog: s.spec.TaskProlog,
	}
}

// taskEpilog runs TaskEpilog as the user after the script exited, with the
// job environment plus SLURM_SCRIPT_CONTEXT and SLURMD_NODENAME, its
// stdout discarded and its stderr in the job's (mgr.c _wait_for_any_task).
func (s *Step) taskEpilog() {
	if s.spec.TaskEpilog == "" {
		return
	}
	env := append(Env(nil), s.env...)
	env.Setenvf("SLURM_SCRIPT_CONTEXT", "epilog_task")
	env.Setenvf("SLURMD_NODENAME", s.spec.NodeName)
	s.runEpilogScript(s.spec.TaskEpilog, "--task-epilog", env, 0)
}

// UserTaskEpilogTimeout bounds srun's --task-epilog: slurmstepd waits 5
// seconds, then kills its process group (mgr.c _run_script_as_user with
// max_wait 5, every release). slurm.conf's TaskEpilog is not bounded.
const UserTaskEpilogTimeout = 5 * time.Second

// runEpilogScript runs a task epilog as the user (bounded by maxWait
// unless it is 0) and reports its failure on the job's stderr with failure
// as stock names it.
func (s *Step) runEpilogScript(path, failure string, env Env, maxWait time.Duration) {
	st, err := s.runAsUser(path, env, maxWait)
	if err != nil {
		s.errorLine("executing %s: %s", path, strerror(err))
	} else if st != 0 {
		s.errorLine("%s failed status=%d", failure, st)
	}
}

// runAsUser runs path through the task helper in script mode and waits,
// at most maxWait (0: no bound) before it kills the script's process
// group. The status is the raw wait status; from 26.05 the exit code of a
// script that exited.
func (s *Step) runAsUser(path string, env Env, maxWait time.Duration) (int, error) {
	self, err := s.opts.selfPath()
	if err != nil {
		return 0, err
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, stepapi.CmdTask)
	// slurmstepd's own stdin and stdout, which the script inherits, are one
	// /dev/null opened read-write (slurmstepd.c dups slurmd's onto both).
	defer proc.AttachDevNull(cmd, true)()
	s.mu.Lock()
	cmd.Stderr = s.stderr
	s.mu.Unlock()
	cmd.ExtraFiles = []*os.File{cfgR}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exitCh, err := s.reaper.Start(cmd)
	cfgR.Close()
	if err != nil {
		cfgW.Close()
		return 0, err
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if s.cg != nil {
		_ = s.cg.AddPID(pid)
	}
	b, _ := json.Marshal(taskConfig{
		Mode: modeScript, NodeName: s.spec.NodeName, Timestamped: s.timestamped(), JobID: s.id.JobID,
		UID: s.uid, GID: s.gid, Groups: s.gids, Cwd: s.cwd,
		Argv: []string{path}, Env: env, Umask: -1,
	})
	_ = writeFrameTo(cfgW, b)
	cfgW.Close()
	var e proc.Exit
	if maxWait > 0 {
		timer := time.NewTimer(maxWait)
		select {
		case e = <-exitCh:
		case <-timer.C:
			s.log.Info("script ran past its time bound, killing it", "path", path, "bound", maxWait)
			_ = proc.KillPG(pid, syscall.SIGKILL)
			e = <-exitCh
		}
		timer.Stop()
	} else {
		e = <-exitCh
	}
	// Whatever it left behind dies with it, as in stock.
	_ = proc.KillPG(pid, syscall.SIGKILL)
	if s.spec.ProtocolVersion >= slurmproto.Version2605 && e.Status.Exited() {
		return e.Status.ExitStatus(), nil
	}
	return int(e.Status), nil
}

// checkOOM is task/cgroup's post-term check: OOM kills in the job's
// cgroup turn the job's status into SIG_OOM.
func (s *Step) checkOOM() {
	if s.cg == nil || s.spec.IgnoreMemoryLimit || s.jobMemMiB == 0 {
		return
	}
	n, err := s.cg.OOMKills()
	if err != nil || n == 0 {
		return
	}
	s.errorLine("Detected %d oom-kill event(s) in StepId=%s. Some of your processes may have been killed by the cgroup out-of-memory handler.", n, stepIDString(s.id))
	s.mu.Lock()
	s.oom = true
	s.mu.Unlock()
}

// containerPIDs lists every live process of the step: its cgroup, its
// session and process group, and every descendant of this step manager
// (orphans re-parent to it as child subreaper). Never this process.
func (s *Step) containerPIDs() []int {
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	seen := map[int]bool{}
	var out []int
	self := os.Getpid()
	if r := s.spankRunner(); r != nil {
		seen[r.PID()] = true // the step manager's helper, killed at its end
	}
	add := func(p int) {
		if p > 0 && p != self && !seen[p] && proc.Alive(p) {
			seen[p] = true
			out = append(out, p)
		}
	}
	if s.cg != nil {
		if pids, err := s.cg.PIDs(); err == nil {
			for _, p := range pids {
				add(p)
			}
		}
	}
	if tree, err := proc.Tree(self, pid, pid); err == nil {
		for _, p := range tree {
			add(p)
		}
	}
	for _, p := range s.adoptedPIDs() {
		add(p)
	}
	return out
}

// hasPID is proctrack_g_has_pid.
func (s *Step) hasPID(pid int) bool {
	for _, p := range s.containerPIDs() {
		if p == pid {
			return true
		}
	}
	return false
}

// signalContainer is proctrack_g_signal: sig to every process of the step.
// A SIGCONT also thaws a cgroup that suspend froze (proctrack/cgroup
// resumes the step on SIGCONT), so that scancel of a suspended job gets its
// SIGTERM through.
func (s *Step) signalContainer(sig syscall.Signal) error {
	if s.prolog != nil && (sig == syscall.SIGKILL || sig == syscall.SIGTERM) {
		// _handle_signal_container: either cancels the step.
		s.externKill.Do(func() { close(s.externKilled) })
	}
	if s.prolog != nil && sig != syscall.SIGKILL {
		// Stock's proctrack (cgroup: only the step manager's children
		// unless SIGKILL; pgid: the holder's group) never signals an
		// adopted login: it gets the SIGKILL at the step's end.
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid <= 0 {
			return nil
		}
		return proc.Signal([]int{pid}, sig)
	}
	if sig == syscall.SIGKILL && s.cg != nil {
		// proctrack/cgroup resumes a frozen step before SIGKILL: a frozen
		// task cannot die, and would outlive its step (a job cancelled
		// while gang scheduling had it suspended).
		s.thaw()
		_ = s.cg.Kill()
	}
	err := proc.Signal(s.containerPIDs(), sig)
	if sig == syscall.SIGCONT {
		s.thaw()
	}
	return err
}

// killAll sends SIGKILL to everything left once the script has exited and
// waits for it to be gone (bounded by ContainerWaitTimeout).
func (s *Step) killAll() {
	deadline := time.Now().Add(ContainerWaitTimeout)
	delay := 5 * time.Millisecond
	for {
		pids := s.containerPIDs()
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.log.Error("processes survive SIGKILL", "pids", pids)
			return
		}
		_ = s.signalContainer(syscall.SIGKILL)
		time.Sleep(delay)
		delay = min(2*delay, time.Second)
	}
}

// jobRC is the job_rc of the completion message: the script's raw wait
// status, or SIG_OOM after OOM kills.
func (s *Step) jobRC() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oom {
		return uint32(slurmproto.SigOOM)
	}
	return uint32(s.estatus)
}

// batchFinish is mgr.c batch_finish: remove the script, report the end to
// slurmctld (unless aborted), then remove the batch directory.
func (s *Step) batchFinish(slurmRC uint32) {
	if err := os.Remove(s.script); err != nil {
		s.log.Error("unlink script", "path", s.script, "error", err)
	}
	s.mu.Lock()
	aborted := s.aborted
	s.mu.Unlock()
	if aborted {
		s.log.Info("job abort completed")
	} else {
		jobRC := s.jobRC()
		s.log.Info("job completed", "slurm_rc", slurmRC, "job_rc", jobRC)
		if err := s.sendComplete(jobRC, slurmRC); err != nil {
			s.log.Error("unable to send job complete message", "error", err)
		}
	}
	if err := syscall.Rmdir(s.batchDir); err != nil && err != syscall.ENOENT {
		s.log.Error("rmdir batch dir", "path", s.batchDir, "error", err)
	}
}

// cStrtol8 is strtol(s, NULL, 8) for values ParseInt refuses (trailing junk).
func cStrtol8(s string) (int, bool) {
	i := 0
	for i < len(s) && cparse.IsSpace(s[i]) {
		i++
	}
	v := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '7' {
		v = v*8 + int(s[i]-'0')
		i++
	}
	return v, true
}
