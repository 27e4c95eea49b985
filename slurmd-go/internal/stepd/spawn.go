//go:build linux

package stepd

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
)

// The step's one spawn path, for the batch script and srun's tasks alike,
// with its hook points in the order of mgr.c's _fork_all_tasks:
//
//	spawnTask    before the fork and the fork: the task helper directly, or
//	             spank-runner's child (task_init_privileged, the drop,
//	             task_init run there before the helper's exec)
//	placeTask    after the fork: proctrack (the cgroup) and the task's
//	             devices, the task still waiting for its config
//	releaseTask  spank's task_post_fork, then the config, which the task
//	             waits for before it becomes its program (the exec gate)
//	exit         waitTasks / jobManager: task epilogs, spank's task_exit
//
// CUDA checkpointing and GPU binding plug into the same points.

// taskSpawn is one task to start.
type taskSpawn struct {
	local int
	// files: stdin, stdout, stderr, the helper's config pipe (fd 3), then
	// any extra fds (the MPI plugin's, fd 4...).
	files []*os.File
	// pgid: 0 a new process group, -1 the step manager's, else that group.
	pgid int
	// setsid: a new session (the batch script; srun --pty's task 0), with
	// fd 0 as its terminal when ctty is set.
	setsid, ctty bool
	// env is the task's environment as plugins see it before the fork
	// (spank-runner only; the helper gets its own in its config).
	env    []string
	traced bool // stopped at its exec for a parallel debugger
}

// spawned is a started task.
type spawned struct {
	pid        int
	exit, stop <-chan proc.Exit
}

// spawnTask forks one task, through spank-runner when the step hosts
// plugins (spankExit then carries its exit, from the runner's wait4).
func (s *Step) spawnTask(self string, ts taskSpawn, spankExit <-chan proc.Exit) (spawned, error) {
	if r := s.spank; r != nil {
		pid, err := r.Task(ts.local, ts.pgid, ts.setsid, ts.ctty, ts.env, ts.files)
		return spawned{pid: pid, exit: spankExit}, err
	}
	cmd := exec.Command(self, stepapi.CmdTask)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ts.files[0], ts.files[1], ts.files[2]
	cmd.ExtraFiles = ts.files[3:]
	cmd.Env = []string{}
	switch {
	case ts.setsid:
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: ts.ctty, Ctty: 0}
	case ts.pgid >= 0:
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: ts.pgid}
	}
	var sp spawned
	var err error
	if ts.traced {
		sp.exit, sp.stop, err = s.reaper.StartTraced(cmd)
	} else {
		sp.exit, err = s.reaper.Start(cmd)
	}
	if err != nil {
		return sp, err
	}
	sp.pid = cmd.Process.Pid
	_ = cmd.Process.Release()
	return sp, nil
}

// placeTask is proctrack_g_add and the task plugin's device confinement
// for a forked task. A task spank-runner forked may already have ended in
// a plugin's task_init_privileged: then its exit is what srun hears, not a
// failed placement.
func (s *Step) placeTask(ltid, pid int, jobLevel bool) error {
	gone := func() bool { return s.spank != nil && !proc.Alive(pid) }
	if s.cg != nil {
		if err := s.cg.AddPID(pid); err != nil && !gone() {
			return fmt.Errorf("proctrack add %d: %w", pid, err)
		}
	}
	if err := s.addTaskDevices(ltid, pid, jobLevel); err != nil && !gone() {
		return fmt.Errorf("task device cgroup: %w", err)
	}
	return nil
}

// releaseTask runs the plugins' task_post_fork for local task i, then
// sends the helper its config: the task goes on to exec. A required
// plugin's failure is returned (the launch fails) and nothing is sent. A
// config that cannot be written is only logged: the task is gone already
// (a plugin's task_init_privileged ended it) and its exit tells the rest.
func (s *Step) releaseTask(i int, w *os.File, cfg []byte) error {
	if s.spank != nil {
		if err := s.spank.Go(i); err != nil {
			w.Close()
			return fmt.Errorf("spank task %d post-fork failed: %w", i, err)
		}
	}
	if err := writeFrameTo(w, cfg); err != nil {
		s.log.Error("release task", "task", i, "error", err)
	}
	w.Close()
	return nil
}
