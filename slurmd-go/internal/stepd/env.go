package stepd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/envarray"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Env is a C environment array (envarray.Env): the step manager's job and
// task environments.
type Env = envarray.Env

// cstr renders a decoded wire string as C's printf("%s") would: NULL (Go
// "") is "(null)", the empty wire string is "".
func cstr(s string) string {
	if s == "" {
		return "(null)"
	}
	return slurmproto.CString(s)
}

// BatchEnvConfig is the node-side input of the batch environment.
type BatchEnvConfig struct {
	ClusterName     string // slurm_conf.cluster_name
	NodeName        string
	TopologyAddr    string
	TopologyPattern string
	PackNodes       bool // SelectTypeParameters CR_Pack_Nodes
	// Version is the launch's protocol version: 24.11 dropped
	// SLURM_NODE_ALIASES from env_array_for_batch_job.
	Version uint16
	// UserEnv is the user's login environment the daemon loaded
	// (SLURM_GET_USER_ENV=1); nil when none was asked for or loaded.
	UserEnv []string
}

// BatchJobEnv is the batch step's environment as slurmstepd holds it before
// forking the script: the submission environment from the launch message
// (merged over the user's login environment when slurmd loaded one, as its
// _get_user_env does), then env_array_for_batch_job (src/common/env.c) and
// the topology variables (slurmstepd.c _step_setup).
func BatchJobEnv(m *slurmproto.BatchJobLaunch, c BatchEnvConfig) Env {
	env := append(Env(nil), m.Environment...)
	if c.UserEnv != nil {
		env = Env(c.UserEnv).Merge(m.Environment)
	}
	envArrayForBatchJob(&env, m, c)
	env.Overwrite("SLURM_TOPOLOGY_ADDR", cstr(c.TopologyAddr))
	env.Overwrite("SLURM_TOPOLOGY_ADDR_PATTERN", cstr(c.TopologyPattern))
	return env
}

func envArrayForBatchJob(env *Env, m *slurmproto.BatchJobLaunch, c BatchEnvConfig) {
	var numHosts uint32
	for _, r := range m.CPUCountReps {
		numHosts += r
	}
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	env.Overwrite("SLURM_CLUSTER_NAME", cstr(c.ClusterName))
	env.Overwrite("SLURM_JOB_ID", u(m.JobID))
	env.Overwrite("SLURM_JOB_NUM_NODES", u(numHosts))
	if m.ArrayTaskID != slurmproto.NoVal {
		env.Overwrite("SLURM_ARRAY_JOB_ID", u(m.ArrayJobID))
		env.Overwrite("SLURM_ARRAY_TASK_ID", u(m.ArrayTaskID))
	}
	env.Overwrite("SLURM_JOB_NODELIST", cstr(m.Nodes))
	env.Overwrite("SLURM_JOB_PARTITION", cstr(m.Partition))
	if c.Version < slurmproto.Version2411 {
		env.Overwrite("SLURM_NODE_ALIASES", cstr(m.AliasList))
	}
	env.Overwrite("SLURM_JOB_CPUS_PER_NODE", compressedToStr(m.CPUsPerNode, m.CPUCountReps))
	env.Overwrite("ENVIRONMENT", "BATCH")
	if c.NodeName != "" {
		env.Overwrite("HOSTNAME", c.NodeName)
	}
	env.Overwrite("SLURM_JOBID", u(m.JobID))
	env.Overwrite("SLURM_NNODES", u(numHosts))
	env.Overwrite("SLURM_NODELIST", cstr(m.Nodes))

	cpusPerTask := m.CPUsPerTask
	if cpusPerTask == 0 || cpusPerTask == slurmproto.NoVal16 {
		cpusPerTask = 1
	}
	if _, ok := env.Get("SLURM_CPUS_PER_TASK"); ok {
		env.Overwrite("SLURM_CPUS_PER_TASK", u(uint32(cpusPerTask)))
	}
	numTasks := m.NTasks
	if numTasks != 0 {
		env.Append("SLURM_NTASKS", u(numTasks))
		env.Append("SLURM_NPROCS", u(numTasks))
	} else {
		for i := range m.CPUsPerNode {
			numTasks += uint32(m.CPUsPerNode[i]/cpusPerTask) * m.CPUCountReps[i]
		}
	}
	req := layoutRequest{
		NumHosts:     int(numHosts),
		NumTasks:     numTasks,
		CPUsPerNode:  m.CPUsPerNode,
		CPUCountReps: m.CPUCountReps,
		CPUsPerTask:  cpusPerTask,
		PackNodes:    c.PackNodes,
	}
	if arb, ok := env.Get("SLURM_ARBITRARY_NODELIST"); ok {
		req.NodeList, req.Arbitrary = arb, true
	} else {
		req.NodeList = slurmproto.CString(m.Nodes)
	}
	tasks, err := taskLayout(req)
	if err != nil {
		// Stock returns here: no tasks per node, memory or account vars.
		return
	}
	env.Overwrite("SLURM_TASKS_PER_NODE", uint16ArrayToStr(tasks))
	if m.PnMinMemory&slurmproto.MemPerCPU != 0 {
		env.Overwrite("SLURM_MEM_PER_CPU", strconv.FormatUint(m.PnMinMemory&^slurmproto.MemPerCPU, 10))
	} else if m.PnMinMemory != 0 {
		env.Overwrite("SLURM_MEM_PER_NODE", strconv.FormatUint(m.PnMinMemory, 10))
	}
	if m.Account != "" {
		env.Overwrite("SLURM_JOB_ACCOUNT", slurmproto.CString(m.Account))
	}
	if m.QOS != "" {
		env.Overwrite("SLURM_JOB_QOS", slurmproto.CString(m.QOS))
	}
	if m.ResvName != "" {
		env.Overwrite("SLURM_JOB_RESERVATION", slurmproto.CString(m.ResvName))
	}
}

// compressedToStr is uint32_compressed_to_str: "2(x3),1".
func compressedToStr(vals []uint16, reps []uint32) string {
	if vals == nil || reps == nil {
		return ""
	}
	var b strings.Builder
	for i := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		if reps[i] > 1 {
			fmt.Fprintf(&b, "%d(x%d)", vals[i], reps[i])
		} else {
			fmt.Fprintf(&b, "%d", vals[i])
		}
	}
	return b.String()
}

// uint16ArrayToStr is uint16_array_to_str: runs of equal values as "v(xN)".
func uint16ArrayToStr(a []uint16) string {
	var b strings.Builder
	prev := 0
	for i := range a {
		if i+1 < len(a) && a[i] == a[i+1] {
			prev++
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if prev > 0 {
			fmt.Fprintf(&b, "%d(x%d)", a[i], prev+1)
		} else {
			fmt.Fprintf(&b, "%d", a[i])
		}
		prev = 0
	}
	return b.String()
}

// ReleaseEnv is what setup_env adds after 22.05, from the launch and its
// credential (slurmstepd_job.c, task.c): Version is the step's protocol
// version and decides which are set.
type ReleaseEnv struct {
	Version          uint16
	JobStart, JobEnd time.Time // 24.11: SLURM_JOB_START_TIME/END_TIME, when set
	JobLicenses      string    // 24.11: SLURM_JOB_LICENSES, when set
	OOMKillStep      bool      // 24.11: SLURM_OOM_KILL_STEP=0|1
	SLUID            uint64    // 26.05: SLURM_JOB_SLUID, when set
}

// ReleaseEnvOf fills a ReleaseEnv from a launch's credential.
func ReleaseEnvOf(version uint16, c *slurmproto.Cred, oomKillStep bool) ReleaseEnv {
	r := ReleaseEnv{Version: version, OOMKillStep: oomKillStep}
	if c != nil {
		r.JobStart, r.JobEnd, r.JobLicenses, r.SLUID = c.JobStartTime, c.JobEndTime, slurmproto.CString(c.JobLicenses), c.StepID.SLUID
	}
	return r
}

func (r ReleaseEnv) apply(env *Env) {
	if r.Version < slurmproto.Version2411 {
		return
	}
	unix := func(k string, t time.Time) {
		if !t.IsZero() && t.Unix() > 0 {
			env.Setenvf(k, strconv.FormatInt(t.Unix(), 10))
		}
	}
	if r.OOMKillStep {
		env.Setenvf("SLURM_OOM_KILL_STEP", "1")
	} else {
		env.Setenvf("SLURM_OOM_KILL_STEP", "0")
	}
	unix("SLURM_JOB_END_TIME", r.JobEnd)
	if r.JobLicenses != "" {
		env.Setenvf("SLURM_JOB_LICENSES", r.JobLicenses)
	}
	unix("SLURM_JOB_START_TIME", r.JobStart)
	if r.Version >= slurmproto.Version2605 && r.SLUID != 0 {
		env.Setenvf("SLURM_JOB_SLUID", slurmproto.FormatSLUID(r.SLUID))
	}
}

// TaskEnvConfig is the per-task input of setup_env for a batch script.
type TaskEnvConfig struct {
	ReleaseEnv
	ConfFile       string // SLURM_CONF ("" prints "(null)")
	CPUsOnNode     uint16 // job->cpus: cpus_per_node[0]
	Overcommit     bool
	JobID          uint32
	TaskPID        int
	NodeID         uint32
	GTIDs          string // "0"
	RestartCount   uint16
	UID, GID       uint32
	UserName       string // "" = unknown (no SLURM_JOB_UID/USER)
	WorkingCluster string
	NodeName       string // SLURMD_NODENAME
}

// BatchTaskEnv is what exec_task makes of the job environment for the
// batch script (task 0): a copy (env_array_copy) with setup_env's
// variables, SLURM_JOB_GID and SLURMD_NODENAME. TaskProlog output, TMPDIR
// and the removal of SLURM_RLIMIT_* happen later, in the task.
func BatchTaskEnv(jobEnv Env, c TaskEnvConfig) Env {
	env := jobEnv.Copy()
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	env.Setenvf("SLURM_CONF", cstr(c.ConfFile))
	env.Unset("SLURM_CONF_SERVER")
	if c.CPUsOnNode != 0 {
		env.Setenvf("SLURM_CPUS_ON_NODE", d(int64(c.CPUsOnNode)))
	}
	if c.Overcommit {
		env.Setenvf("SLURM_OVERCOMMIT", "1")
	}
	// C prints the job id with %d from an int.
	env.Setenvf("SLURM_JOB_ID", d(int64(int32(c.JobID))))
	env.Setenvf("SLURM_JOBID", d(int64(int32(c.JobID))))
	if c.TaskPID != 0 {
		env.Setenvf("SLURM_TASK_PID", d(int64(c.TaskPID)))
	}
	env.Setenvf("SLURM_NODEID", d(int64(int32(c.NodeID))))
	env.Setenvf("SLURM_PROCID", "0")
	env.Setenvf("SLURM_LOCALID", "0")
	if c.Version >= slurmproto.Version2605 {
		// 26.05 sets the step id unless NO_VAL: SLURM_BATCH_SCRIPT as %d.
		batch := slurmproto.StepIDBatch
		env.Setenvf("SLURM_STEP_ID", d(int64(int32(batch))))
		env.Setenvf("SLURM_STEPID", d(int64(int32(batch))))
	}
	c.ReleaseEnv.apply(&env)
	env.Setenvf("SLURM_GTIDS", c.GTIDs)
	if c.RestartCount != 0 {
		env.Setenvf("SLURM_RESTART_COUNT", d(int64(c.RestartCount)))
	}
	if c.UserName != "" {
		env.Setenvf("SLURM_JOB_UID", strconv.FormatUint(uint64(c.UID), 10))
		env.Setenvf("SLURM_JOB_USER", c.UserName)
	}
	if c.WorkingCluster != "" { // 22.05 only
		env.Setenvf("SLURM_WORKING_CLUSTER", c.WorkingCluster)
	}
	env.Setenvf("SLURM_JOB_GID", strconv.FormatUint(uint64(c.GID), 10))
	env.Setenvf("SLURMD_NODENAME", c.NodeName)
	return env
}

// RlimitEnvName is the variable sbatch exports for a limit ("SLURM_RLIMIT_CPU").
func RlimitEnvName(limit string) string { return "SLURM_RLIMIT_" + limit }

// StepEnvConfig is the per-task input of setup_env for a step task.
type StepEnvConfig struct {
	ReleaseEnv
	ConfFile       string
	CPUsOnNode     uint16 // job->cpus: the step's CPUs on this node
	JobID, StepID  uint32
	TaskPID        int
	NodeID         uint32 // this node's rank in the step
	ProcID         uint32 // global task id
	LocalID        uint32
	GTIDs          string // the node's global task ids, comma separated
	CommPort       uint16 // srun's response port for this node
	LaunchHost     string // srun's address (SLURM_LAUNCH_NODE_IPADDR)
	UID, GID       uint32
	UserName       string
	WorkingCluster string
	NodeName       string
	TresBind       string
	TresFreq       string
}

// StepTaskEnv is what exec_task makes of the step's environment (srun's
// env with SLURM_SRUN_COMM_HOST and the topology variables) for one task:
// setup_env with the step's values, SLURM_JOB_GID and SLURMD_NODENAME.
// srun already set the job-wide variables (SLURM_NTASKS, SLURM_NODELIST,
// ...), which slurmstepd leaves alone for steps.
func StepTaskEnv(stepEnv Env, c StepEnvConfig) []string {
	env := stepEnv.Copy()
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	env.Setenvf("SLURM_CONF", cstr(c.ConfFile))
	env.Unset("SLURM_CONF_SERVER")
	if c.CPUsOnNode != 0 {
		env.Setenvf("SLURM_CPUS_ON_NODE", d(int64(c.CPUsOnNode)))
	}
	env.Setenvf("SLURM_JOB_ID", d(int64(int32(c.JobID))))
	env.Setenvf("SLURM_JOBID", d(int64(int32(c.JobID))))
	if c.TaskPID != 0 {
		env.Setenvf("SLURM_TASK_PID", d(int64(c.TaskPID)))
	}
	env.Setenvf("SLURM_NODEID", d(int64(int32(c.NodeID))))
	env.Setenvf("SLURM_PROCID", d(int64(int32(c.ProcID))))
	env.Setenvf("SLURM_LOCALID", d(int64(int32(c.LocalID))))
	// 22.05 and 24.11 set them only for a non-negative int (a special step
	// id, interactive or extern, keeps what srun sent); 26.05 for any
	// but NO_VAL.
	if int32(c.StepID) >= 0 || (c.Version >= slurmproto.Version2605 && c.StepID != slurmproto.NoVal) {
		env.Setenvf("SLURM_STEP_ID", d(int64(int32(c.StepID))))
		env.Setenvf("SLURM_STEPID", d(int64(int32(c.StepID))))
	}
	c.ReleaseEnv.apply(&env)
	if c.CommPort != 0 {
		env.Setenvf("SLURM_SRUN_COMM_PORT", d(int64(c.CommPort)))
	}
	if c.LaunchHost != "" {
		env.Setenvf("SLURM_LAUNCH_NODE_IPADDR", c.LaunchHost)
	}
	env.Setenvf("SLURM_GTIDS", c.GTIDs)
	if c.UserName != "" {
		env.Setenvf("SLURM_JOB_UID", strconv.FormatUint(uint64(c.UID), 10))
		env.Setenvf("SLURM_JOB_USER", c.UserName)
	}
	if c.WorkingCluster != "" { // 22.05 only
		env.Setenvf("SLURM_WORKING_CLUSTER", c.WorkingCluster)
	}
	env.Setenvf("SLURM_JOB_GID", strconv.FormatUint(uint64(c.GID), 10))
	env.Setenvf("SLURMD_NODENAME", c.NodeName)
	if c.TresBind != "" {
		env.Setenvf("SLURMD_TRES_BIND", c.TresBind)
	}
	if c.TresFreq != "" {
		env.Setenvf("SLURMD_TRES_FREQ", c.TresFreq)
	}
	return env
}
