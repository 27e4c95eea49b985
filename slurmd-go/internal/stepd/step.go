//go:build linux

package stepd

import (
	"errors"
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/fname"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/spank"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/cgroup"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/suspend"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Step is one batch step inside its step manager. The lifecycle runs on
// one goroutine (Serve); socket connections read and change the fields
// guarded by mu from their own goroutines.
type Step struct {
	spec   *stepapi.StartSpec
	msg    *slurmproto.BatchJobLaunch // batch steps
	launch *slurmproto.LaunchTasks    // tasks steps (srun)
	prolog *slurmproto.LaunchProlog   // the extern step (PrologFlags=Contain)
	nodeID int                        // tasks steps: this node's rank in the step
	tasks  []*stepTask                // tasks steps: the local tasks
	sio    *stepIO                    // tasks steps: I/O to srun and sattach
	pty    *os.File                   // tasks steps with --pty: the terminal's master side
	spank  *spank.Runner              // the step's SPANK plugins' host, if plugstack.conf names any
	// spankFailed: a required plugin failed init or user_init (launch failed).
	spankFailed bool
	mpi         MPIHost // tasks steps: the MPI plugin's server (mpi.go), nil for none
	opts        Options
	log         hclog.Logger
	id          slurmproto.StepID

	// Identity and limits, fixed at setup.
	uid, gid   uint32
	gids       []uint32
	grNames    []string
	userName   string
	pwGecos    string
	pwDir      string
	pwShell    string
	jobMemMiB  uint64
	stepMemMiB uint64
	cpus       uint16
	cwd        string
	env        Env // the job environment before exec_task (job->env)

	// Files and paths made at setup.
	batchDir, script string
	inName, outName  string
	errName          string
	sockPath         string
	ln               *net.UnixListener
	connMu           sync.Mutex
	closing          bool           // no new connections; guarded by connMu
	conns            sync.WaitGroup // open socket connections; Add under connMu

	cg     cgroup.Cgroup // nil: no cgroup (tracking by session and pgid)
	gres   *stepGres     // nil: no GRES plugin on the node (gres.go)
	reaper *proc.Reaper

	mu          sync.Mutex
	stateCh     chan struct{} // closed and replaced at each state change; guarded by mu
	state       stepapi.State // guarded by mu
	pid         int           // the script's pid = its session and pgid; guarded by mu
	exited      bool          // guarded by mu
	estatus     int32         // raw wait status; guarded by mu
	killedByCmd bool          // guarded by mu
	aborted     bool          // SIG_ABORT: no completion message; guarded by mu
	// susp runs suspend and resume (suspend.go); made on first use and
	// guarded by mu.
	susp     *suspend.Machine
	frozen   bool     // suspend froze the cgroup; guarded by mu
	msgSent  bool     // a cancel line was written; guarded by mu
	oom      bool     // guarded by mu
	stderr   *os.File // the job's stderr, for stepd error lines; guarded by mu
	errLevel int      // the highest log level written to stderr (below logError: logError); guarded by mu
	// attachedResp are the response addresses of sattach clients, which
	// get MESSAGE_TASK_EXIT too; guarded by mu.
	attachedResp []string
	// adopted are the pids REQUEST_ADD_EXTERN_PID added to the extern
	// step (pam_slurm_adopt's logins); guarded by mu.
	adopted map[int]bool
	// externKilled is closed (once, externKill) when the extern step is
	// killed: what a 26.05 extern step, which holds no process, waits for.
	externKilled chan struct{}
	externKill   sync.Once
}

// setupError is a setup failure with the rc the step manager reports.
type setupError struct {
	rc  uint32
	err error
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

func failSetup(rc uint32, format string, args ...any) error {
	return &setupError{rc: rc, err: fmt.Errorf(format, args...)}
}

// setupRC is the rc of a setup error.
func setupRC(err error) uint32 {
	var se *setupError
	if errors.As(err, &se) {
		return se.rc
	}
	return slurmproto.SlurmError
}

// newStep decodes the launch and does what slurmstepd does before it
// answers slurmd: the step record (user, groups, memory, file names), the
// batch directory and script, the environment and the step socket.
func newStep(spec *stepapi.StartSpec, o Options, log hclog.Logger) (*Step, error) {
	b, err := slurmproto.DecodeBody(spec.ProtocolVersion, slurmproto.RequestBatchJobLaunch, spec.LaunchBody)
	if err != nil {
		return nil, failSetup(slurmproto.ESlurmdSetupEnvironmentError, "stepd: launch body: %w", err)
	}
	m := b.(*slurmproto.BatchJobLaunch)
	id := slurmproto.StepID{JobID: m.JobID, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal}
	if m.Cred != nil && m.Cred.StepID.JobID == m.JobID {
		id.SLUID = m.Cred.StepID.SLUID // 26.05 fills it in
	}
	s := &Step{
		spec: spec, msg: m, opts: o,
		id:      id,
		state:   stepapi.StateStarting,
		stateCh: make(chan struct{}),
		uid:     m.UID, gid: m.GID,
		cwd: slurmproto.CString(m.WorkDir),
	}
	s.log = log.With("job_id", m.JobID, "step_id", "batch")
	s.fromCred()
	if len(m.CPUsPerNode) > 0 {
		s.cpus = m.CPUsPerNode[0]
	}
	s.fileNames()
	if err := s.makeBatchScript(); err != nil {
		return nil, err
	}
	s.env = BatchJobEnv(m, BatchEnvConfig{
		ClusterName: spec.ClusterName, NodeName: spec.NodeName,
		TopologyAddr: spec.TopologyAddr, TopologyPattern: spec.TopologyPattern,
		PackNodes: spec.PackNodes, Version: spec.ProtocolVersion,
		UserEnv: spec.UserEnv,
	})
	// slurmstepd.c: a batch step's GRES variables are the job's.
	s.initGres(m.Cred, "", 0)
	if s.gres != nil {
		s.gres.node.JobEnv(&s.env, s.gres.launch)
	}
	if err := s.listen(); err != nil {
		s.removeBatchScript()
		return nil, err
	}
	return s, nil
}

// fromCred takes user, groups and memory from the credential, as slurmd
// and slurmstepd do (no NSS lookup unless the credential lacks a name).
func (s *Step) fromCred() {
	c := s.msg.Cred
	s.userName = slurmproto.CString(c.PwName)
	if s.userName == "" {
		s.userName = proc.UserName(s.uid)
	}
	s.pwGecos, s.pwDir, s.pwShell = slurmproto.CString(c.PwGecos), slurmproto.CString(c.PwDir), slurmproto.CString(c.PwShell)
	s.gids, s.grNames = c.Gids, c.GrNames
	if len(s.gids) == 0 {
		// The credential always carries gids unless send_gids is off;
		// then slurmd would look them up. Fall back to the message.
		s.gids = s.msg.Gids
	}
	if len(s.gids) == 0 {
		s.gids = []uint32{s.gid}
	}
	idx := s.spec.NodeIndex
	if hl, err := hostlist.Parse(slurmproto.CString(c.JobHostlist)); err == nil {
		if i := hl.Find(s.spec.NodeName); i >= 0 {
			idx = i
		}
	}
	s.jobMemMiB, s.stepMemMiB = c.MemLimits(idx, idx)
	if s.jobMemMiB == 0 {
		s.jobMemMiB, s.stepMemMiB = s.msg.JobMem, s.msg.JobMem
	}
}

// fileNames expands the stdio patterns.
func (s *Step) fileNames() {
	j := fname.JobFor(s.msg, s.userName, s.patternHost(), s.cwd)
	s.inName, s.outName, s.errName = fname.BatchStdio(s.msg, j)
}

// makeBatchScript creates SpoolDir/job%05u (0750, group of the job) and
// slurm_script in it (0700, owned by the user), as mgr.c
// _make_batch_dir/_make_batch_script.
func (s *Step) makeBatchScript() error {
	const rc = slurmproto.ESlurmdCreateBatchDirError
	dir := stepapi.BatchDir(s.spec.SpoolDir, s.id.JobID)
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return failSetup(rc, "stepd: mkdir(%s): %w", dir, err)
	}
	s.batchDir = dir
	fail := func(format string, args ...any) error {
		_ = syscall.Rmdir(dir)
		s.batchDir = ""
		return failSetup(rc, format, args...)
	}
	if err := os.Chown(dir, -1, int(s.gid)); err != nil {
		return fail("stepd: chown(%s): %w", dir, err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return fail("stepd: chmod(%s, 750): %w", dir, err)
	}
	body := slurmproto.CString(s.msg.Script)
	if body == "" {
		return fail("stepd: called with empty script")
	}
	script := filepath.Join(dir, "slurm_script")
	f, err := os.OpenFile(script, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return fail("stepd: couldn't open `%s': %w", script, err)
	}
	_, err = f.WriteString(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chown(script, int(s.uid), -1)
	}
	if err != nil {
		_ = os.Remove(script)
		return fail("stepd: write %s: %w", script, err)
	}
	s.script = script
	return nil
}

func (s *Step) removeBatchScript() {
	if s.script != "" {
		if err := os.Remove(s.script); err != nil {
			s.log.Error("unlink script", "path", s.script, "error", err)
		}
	}
	if s.batchDir != "" {
		if err := syscall.Rmdir(s.batchDir); err != nil && err != syscall.ENOENT {
			s.log.Error("rmdir batch dir", "path", s.batchDir, "error", err)
		}
	}
}

// setState changes the state and wakes waitRunning.
func (s *Step) setState(st stepapi.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == st {
		return
	}
	s.state = st
	close(s.stateCh)
	s.stateCh = make(chan struct{})
}

// State is the step's current state. Any goroutine.
func (s *Step) State() stepapi.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// RunningWait is how long a signal request waits for a starting step
// (req.c _wait_for_job_running: two waits of 60 s).
const RunningWait = 2 * time.Minute

// waitRunning blocks until the step is Running (or later) or RunningWait
// passes; it returns ESLURMD_JOB_NOTRUNNING in the latter case.
func (s *Step) waitRunning() uint32 {
	deadline := time.NewTimer(s.opts.runningWait())
	defer deadline.Stop()
	for {
		s.mu.Lock()
		st, ch := s.state, s.stateCh
		s.mu.Unlock()
		if st >= stepapi.StateRunning {
			return 0
		}
		select {
		case <-ch:
		case <-deadline.C:
			return slurmproto.ESlurmdJobNotRunning
		}
	}
}

// errorLine writes a stock slurmstepd error line to the job's stderr
// ("slurmstepd-<node>: error: ..."), where slurmstepd's log goes once the
// job's I/O is set up; it is logged too.
func (s *Step) errorLine(format string, args ...any) {
	s.stepdLog(logError, format, args...)
}

// timestamped: 26.05's step manager logs to the job's stderr with a timestamp.
func (s *Step) timestamped() bool { return s.spec.ProtocolVersion >= slurmproto.Version2605 }

// errorPrefix starts an error line of the step manager's on the job's
// stderr, as stepdLog writes one; the task helper writes its own with it.
func errorPrefix(node string, timestamped bool) string {
	if timestamped {
		return "[" + logTimestamp(time.Now()) + "] error: "
	}
	return "slurmstepd-" + node + ": error: "
}

// authorized is _slurm_authorized_user: root or SlurmUser.
func (s *Step) authorized(uid uint32) bool {
	return uid == 0 || uid == s.spec.SlurmUserUID
}

// patternHost is what %N expands to in output file names: the host's short
// name up to 24.11, the NodeName from 26.05 on.
func (s *Step) patternHost() string {
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		return s.spec.NodeName
	}
	return s.spec.Hostname
}
