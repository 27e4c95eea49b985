//go:build linux

package stepd

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/spank"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// RunnerName is spank-runner's file name, next to slurmstepd-go.
const RunnerName = "spank-runner"

// optTypeSpank is OPT_TYPE_SPANK (job_options.h): a SPANK option srun sent.
const optTypeSpank = 0x4400

// spankStep returns whether the step hosts SPANK plugins (plugstack.conf
// names one), logging a plugstack.conf it cannot read as an empty stack.
func (s *Step) spankStep() bool {
	ok, err := spank.HasPlugins(s.spec.PlugStack)
	if err != nil {
		s.log.Error("plugstack.conf", "error", err)
		return false
	}
	return ok
}

// startSpank starts the step's spank-runner and waits until its init through
// user_init ran; it applies what plugins set in the step env. A required
// plugin's failure returns stock's launch rc (mgr.c: init
// SLURM_PLUGIN_NAME_INVALID, user_init SLURM_ERROR).
func (s *Step) startSpank(mode string, tasks []uint32) (uint32, bool) {
	self, err := s.opts.selfPath()
	if err != nil {
		s.log.Error("cannot find own binary", "error", err)
		return slurmproto.SlurmError, false
	}
	st := spank.Step{
		Mode: mode, PlugStack: s.spec.PlugStack, PluginDir: s.spec.PluginDir,
		Helper: self, SlurmVersion: slurmproto.ReleaseVersion(s.spec.ProtocolVersion),
		UID: s.uid, GID: s.gid, User: s.userName, Groups: s.gids, Cwd: s.cwd,
		JobID: s.id.JobID, StepID: s.id.StepID, NNodes: 1, Tasks: tasks, TotalTasks: uint32(len(tasks)),
		Env: append([]string(nil), s.env...),
	}
	st.JobAllocMem, st.StepAllocMem = s.jobMemMiB, s.stepMemMiB
	if m := s.launch; m != nil {
		st.NNodes, st.NodeID, st.TotalTasks = m.NNodes, uint32(s.nodeID), m.NTasks
		st.NCPUs, st.CPUsPerTask = uint32(m.NodeCPUs), uint32(m.CPUsPerTask)
		st.Argv = append([]string(nil), m.Argv...)
		st.JobAllocCores, st.StepAllocCores = s.allocCores(m.Cred)
		// stepd_step_rec_create: the job id and NO_VAL unless the step's
		// environment names an array job.
		st.ArrayID, st.ArrayTaskID = s.id.JobID, slurmproto.NoVal
		if v, ok := s.env.Get("SLURM_ARRAY_JOB_ID"); ok {
			st.ArrayID = atou32(v)
		}
		if v, ok := s.env.Get("SLURM_ARRAY_TASK_ID"); ok {
			st.ArrayTaskID = atou32(v)
		}
		for _, o := range m.JobOptions {
			if o.Type != optTypeSpank {
				continue
			}
			name, plugin, _ := strings.Cut(o.Opt, ":")
			// packstr(NULL) unpacks as "", an empty string as EmptyString.
			st.Options = append(st.Options, spank.Option{Name: name, Plugin: plugin, Value: slurmproto.CString(o.Arg), Null: o.Arg == ""})
		}
	}
	if m := s.msg; m != nil {
		// batch_stepd_step_rec_create: no node count; the CPUs of the node
		// are also the step's per task.
		st.NNodes, st.TotalTasks = 0, m.NTasks
		st.NCPUs, st.CPUsPerTask = uint32(s.cpus), uint32(s.cpus)
		st.RestartCount = uint32(m.RestartCnt)
		st.ArrayID, st.ArrayTaskID = m.ArrayJobID, m.ArrayTaskID
		// The job's argv is the script as the step manager wrote it.
		st.Argv = append([]string{s.script}, m.Argv[min(1, len(m.Argv)):]...)
		st.JobAllocCores, st.StepAllocCores = s.allocCores(m.Cred)
	}
	if m := s.prolog; m != nil {
		// _spawn_prolog_stepd's launch request: one CPU per task, the job
		// id as the array job's.
		st.CPUsPerTask = 1
		st.JobAllocCores, st.StepAllocCores = s.allocCores(m.Cred)
		st.ArrayID, st.ArrayTaskID = s.id.JobID, slurmproto.NoVal
	}
	st.NodeName, st.ErrTimestamp = s.spec.NodeName, s.timestamped()
	r, err := spank.Start(spank.Config{
		Path:      filepath.Join(filepath.Dir(self), RunnerName),
		Start:     func(cmd *exec.Cmd) (<-chan proc.Exit, error) { return s.reaper.Start(cmd) },
		Log:       s.log.Named("spank"),
		ErrorLine: func(l string) { s.errorLine("%s", l) },
	}, st)
	if err != nil {
		s.log.Error("spank-runner", "error", err)
		return slurmproto.SlurmError, false
	}
	delta, err := r.Ready()
	if err != nil {
		// Before the step's I/O: nothing reaches srun but the rc (26.05
		// passes spank_init's own -1 on).
		r.Close()
		s.log.Error("Plugin stack initialization failed.", "error", err)
		s.spankFailed = true
		if s.spec.ProtocolVersion >= slurmproto.Version2605 {
			return slurmproto.SlurmError, false
		}
		return slurmproto.SlurmPluginNameInvalid, false
	}
	if mode == spank.ModeTasks || mode == spank.ModeBatch {
		if delta, err = r.User(); err != nil {
			r.Close()
			s.errorLine("spank_user failed.")
			s.log.Error("spank_user failed.", "error", err)
			s.spankFailed = true
			if len(s.tasks) > 0 && s.spec.ProtocolVersion >= slurmproto.Version2411 {
				// 24.11's _fork_all_tasks: task 0 "exited" with code 1.
				s.mu.Lock()
				s.tasks[0].exited, s.tasks[0].status = true, 1<<8
				s.mu.Unlock()
			}
			return slurmproto.ESlurmdExecveFailed, false
		}
	}
	s.env = Env(delta.Apply(s.env))
	s.mu.Lock()
	s.spank = r
	s.mu.Unlock()
	return 0, true
}

// spankTaskExit runs the plugins' task_exit for local task t.
func (s *Step) spankTaskExit(ltid uint32) {
	if s.spank == nil {
		return
	}
	if err := s.spank.Reaped(int(ltid)); err != nil {
		s.log.Warn("spank task_exit", "task", ltid, "error", err)
	}
}

// finiSpank runs the plugins' exit hooks after the step's I/O drained.
func (s *Step) finiSpank() {
	s.mu.Lock()
	r := s.spank
	s.spank = nil
	s.mu.Unlock()
	if r == nil {
		return
	}
	if rc, err := r.Fini(); err != nil || rc != 0 {
		s.log.Warn("spank exit", "rc", rc, "error", err)
		if rc != 0 {
			s.errorLine("spank_fini failed")
		}
	}
	r.Close()
}

// spankExitChans routes the runner's task exits to one channel per local
// task, as the reaper gives them for tasks it forked.
func (s *Step) spankExitChans(n int) map[int]chan proc.Exit {
	chans := make(map[int]chan proc.Exit, n)
	for i := 0; i < n; i++ {
		chans[i] = make(chan proc.Exit, 1)
	}
	go func(r *spank.Runner) {
		done := map[int]bool{}
		for x := range r.Exits() {
			if ch, ok := chans[x.Local]; ok && !done[x.Local] {
				done[x.Local] = true
				ch <- x.Exit
			}
		}
		// The runner ended (a plugin crashed it, or it killed its tasks
		// after a failed hook): it killed what it had forked, so a task
		// not reported is reported killed, and nobody waits forever.
		for i, ch := range chans {
			if !done[i] {
				ch <- proc.Exit{Status: syscall.WaitStatus(syscall.SIGKILL)}
			}
		}
	}(s.spank)
	return chans
}

// spankRunner is the step's runner, if any (read by the kill path).
func (s *Step) spankRunner() *spank.Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spank
}

// allocCores is format_core_allocs: this node's cores of the job and of the
// step in the credential, as core ranges ("0-1").
func (s *Step) allocCores(c *slurmproto.Cred) (job, step string) {
	if c == nil {
		return "", ""
	}
	hl, err := hostlist.Parse(slurmproto.CString(c.JobHostlist))
	if err != nil {
		return "", ""
	}
	nc, ok := c.CoresForNode(hl.Find(s.spec.NodeName))
	if !ok {
		return "", ""
	}
	return coreRanges(nc.Job), coreRanges(nc.Step)
}

// coreRanges formats sorted core ids as bit_fmt does: "0-2,5".
func coreRanges(ids []int) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ids[i], ids[j])
		} else {
			fmt.Fprintf(&b, "%d", ids[i])
		}
		i = j + 1
	}
	return b.String()
}

func atou32(v string) uint32 {
	n, _ := strconv.ParseUint(v, 10, 32)
	return uint32(n)
}
