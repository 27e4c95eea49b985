package stepd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// The step manager's side of an MPI plugin: stock's mpi_g_slurmstepd_prefork
// (before any task is forked, mgr.c job_manager), mpi_g_slurmstepd_task
// (in each task before its exec, task.c exec_task) and mpi_fini (at the
// step manager's exit). A plugin registers a constructor for its plugin id
// in mpiHosts; a task step (never a batch or extern step) whose launch
// names that id gets one host:
//
//	newMPIHost ─▶ Prefork ─▶ Task (per local task) ─▶ AfterFork ─▶ … tasks run … ─▶ Fini

// MPIHost is one step's MPI plugin server.
type MPIHost interface {
	// Prefork starts the plugin's servers; env is the step's environment,
	// from which it takes (and unsets, as stock) its own variables. An
	// error fails the launch (stock: "Failed mpi_g_slurmstepd_prefork").
	Prefork(ctx context.Context, env *Env) error
	// Task gives local task t what it needs: variables overwritten in its
	// environment ("K=V") and files it keeps open across its exec, the
	// i-th as fd t.FirstFD+i.
	Task(t MPITask) (env []string, files []*os.File, err error)
	// AfterFork runs once every task was forked, or the launch failed: the
	// step manager's copies of the tasks' files may be closed.
	AfterFork()
	// Fini stops the servers and removes what Prefork made; it runs once
	// the tasks are gone, before the step reports its completion.
	Fini()
}

// MPITask is one local task as the plugin sees it.
type MPITask struct {
	LocalID  int    // index among this node's tasks
	GlobalID uint32 // rank in the step
	NTasks   uint32 // tasks in the step
	FirstFD  int    // the fd number of the first file Task returns
}

// MPIStep is what a plugin's constructor is given.
type MPIStep struct {
	Spec   *stepapi.StartSpec
	Launch *slurmproto.LaunchTasks
	NodeID int      // this node's index in the step
	GTIDs  []uint32 // the ranks of this node's tasks, by local id
	UID    uint32
	GID    uint32
	// Conf is the step's slurm.conf (Spec.ConfFile), read once for every
	// plugin: SlurmdSpoolDir unexpanded, TreeWidth, the nodes' addresses.
	Conf     *slurmconf.Config
	ConfPath string
	// Caller signs and sends RPCs as the step manager (to srun, to other
	// nodes' slurmd: internal/fwddata.Send).
	Caller AddrCaller
	Log    hclog.Logger
	// KillStep signals every task of the step on every node, as stock's
	// slurm_kill_job_step (through slurmctld); signal may be one of
	// Slurm's own (SIG_TERM_KILL).
	KillStep func(signal uint16)
}

// mpiHosts maps MPIPluginID to the constructor of its host.
var mpiHosts = map[uint32]func(*MPIStep) (MPIHost, error){}

// RegisterMPIHost adds the host of an MPI plugin; called from init.
func RegisterMPIHost(pluginID uint32, newHost func(*MPIStep) (MPIHost, error)) {
	if _, dup := mpiHosts[pluginID]; dup {
		panic(fmt.Sprintf("stepd: MPI plugin %d registered twice", pluginID))
	}
	mpiHosts[pluginID] = newHost
}

// newMPIHost returns the step's MPI host, nil when its plugin needs none
// (none, or unset). A plugin slurmd-go cannot host is an error.
func (s *Step) newMPIHost() (MPIHost, error) {
	m := s.launch
	id := m.MPIPluginID
	// mgr.c: the interactive step (salloc's) gets no MPI hooks.
	if mpiNone(id) || s.id.StepID == slurmproto.StepIDInteractive {
		return nil, nil
	}
	newHost, ok := mpiHosts[id]
	if !ok {
		name := slurmproto.MPIPluginName(id)
		if name == "" {
			name = fmt.Sprint(id)
		}
		// Running the tasks without the plugin's server would leave MPI
		// ranks to start as singletons or hang: the launch fails instead,
		// saying why on srun's stderr.
		return nil, fmt.Errorf("slurmd-go does not host mpi/%s (it hosts mpi/pmi2 and mpi/pmix): use --mpi=pmi2, --mpi=pmix or --mpi=none", name)
	}
	gtids := make([]uint32, len(s.tasks))
	for i, t := range s.tasks {
		gtids[i] = t.gtid
	}
	caller, _ := s.opts.Ctld.(AddrCaller)
	path := s.spec.ConfFile
	if path == "" {
		path = slurmconf.DefaultConfFile
	}
	conf, err := slurmconf.Load(path, slurmconf.Options{Version: s.spec.ProtocolVersion})
	if err != nil {
		// The plugins need a few keys only: a line this release's parser
		// refuses must not fail an MPI step the daemon runs.
		conf, err = slurmconf.Load(path, slurmconf.Options{Version: slurmconf.Lenient})
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: read %s: %w", path, err)
	}
	return newHost(&MPIStep{
		Spec: s.spec, Launch: m, NodeID: s.nodeID, GTIDs: gtids, UID: s.uid, GID: s.gid,
		Conf: conf, ConfPath: path,
		Caller: caller, Log: stepdTee{s.log.Named("mpi"), s}, KillStep: s.killStepEverywhere,
	})
}

// mpiPrefork builds and starts the step's MPI host; false fails the launch.
func (s *Step) mpiPrefork() bool {
	h, err := s.newMPIHost()
	if err == nil && h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), MPIPreforkTimeout)
		err = h.Prefork(ctx, &s.env)
		cancel()
		if err != nil {
			h.Fini()
		}
	}
	if err != nil {
		s.log.Error("Failed mpi_g_slurmstepd_prefork", "error", err)
		s.errorLine("%v", err)
		s.errorLine("Failed mpi_g_slurmstepd_prefork")
		return false
	}
	s.mpi = h
	return true
}

// MPIPreforkTimeout bounds a plugin's setup (sockets, its server's start).
const MPIPreforkTimeout = 30 * time.Second

// mpiTask returns the task's MPI variables and files; firstFD is the fd
// the first file gets in the task helper.
func (s *Step) mpiTask(t *stepTask, firstFD int) ([]string, []*os.File, error) {
	if s.mpi == nil {
		return nil, nil, nil
	}
	return s.mpi.Task(MPITask{LocalID: int(t.ltid), GlobalID: t.gtid, NTasks: s.launch.NTasks, FirstFD: firstFD})
}

func (s *Step) mpiAfterFork() {
	if s.mpi != nil {
		s.mpi.AfterFork()
	}
}

func (s *Step) mpiFini() {
	if s.mpi != nil {
		s.mpi.Fini()
	}
}

// killStepEverywhere is slurm_kill_job_step(job, step, sig): slurmctld
// signals the step on all its nodes. A het step is named by its het job id,
// as mpi/pmi2's job_info has it; 26.05 passes the step's het component
// (earlier releases NO_VAL).
func (s *Step) killStepEverywhere(sig uint16) {
	jobID := s.id.JobID
	if h := s.launch.HetJobID; h != 0 && h != slurmproto.NoVal {
		jobID = h
	}
	comp := slurmproto.NoVal
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		comp = s.id.StepHetComp
	}
	req := &slurmproto.JobStepKill{
		StepID: slurmproto.StepID{JobID: jobID, StepID: s.id.StepID, StepHetComp: comp},
		Signal: sig,
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.callBudget())
	defer cancel()
	reply, err := s.opts.Ctld.Call(ctx, req, auth.UIDAny)
	if err == nil {
		if rc, ok := reply.(*slurmproto.ReturnCode); ok && rc.RC != 0 {
			err = fmt.Errorf("slurmctld answered %s", slurmproto.RCName(rc.RC))
		}
	}
	if err != nil {
		s.log.Error("slurm_kill_job_step failed", "signal", sig, "error", err)
	}
}

// stepdTee is the plugin's logger: its lines also go to the job's stderr
// at the step's stderr level, as a stock plugin's error() in slurmstepd
// reaches srun ("slurmstepd-t1: error: mpi/pmi2: ...").
type stepdTee struct {
	hclog.Logger
	s *Step
}

func (t stepdTee) Error(msg string, args ...any) {
	t.Logger.Error(msg, args...)
	t.s.stepdStderr(logError, msg)
}

func (t stepdTee) Info(msg string, args ...any) {
	t.Logger.Info(msg, args...)
	t.s.stepdStderr(logInfo, msg)
}

func (t stepdTee) Debug(msg string, args ...any) {
	t.Logger.Debug(msg, args...)
	t.s.stepdStderr(logDebug, msg)
}

func (t stepdTee) With(args ...any) hclog.Logger { return stepdTee{t.Logger.With(args...), t.s} }

func (t stepdTee) Named(name string) hclog.Logger { return stepdTee{t.Logger.Named(name), t.s} }
