package jobmgr

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

const authUIDAny = auth.UIDAny

// scriptJob is what Prolog and Epilog are told about a job
// (prep_script_slurmd.c's job_env plus the credential).
type scriptJob struct {
	JobID, HetJobID uint32
	UID, GID        uint32
	UserName        string
	WorkDir         string
	Nodes           string
	Partition       string
	AliasList       string
	SpankJobEnv     []string
	Cred            *slurmproto.Cred
	// Epilog only.
	Epilog              bool
	DerivedEC, ExitCode uint32
}

// scriptEnv builds the environment of Prolog/Epilog as slurmd does.
func (m *Manager) scriptEnv(j scriptJob) []string {
	cfg := m.cfg()
	v := m.protocol()
	env := []string{}
	// valid_spank_job_env: the SPANK job env is user input and Prolog/Epilog
	// run as root, so every entry gets a SPANK_ prefix it lacks.
	for _, kv := range j.SpankJobEnv {
		if !strings.HasPrefix(kv, "SPANK_") {
			kv = "SPANK_" + kv
		}
		env = append(env, kv)
	}
	// setenvf: a later value replaces an earlier one in place.
	set := func(k, val string) {
		for i, kv := range env {
			if strings.HasPrefix(kv, k+"=") {
				env[i] = k + "=" + val
				return
			}
		}
		env = append(env, k+"="+val)
	}
	u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
	set("SLURMD_NODENAME", cfg.NodeName)
	set("SLURM_CONF", cfg.Flags.ConfFile)
	set("SLURM_CLUSTER_NAME", cfg.Conf.ClusterName)
	set("SLURM_JOB_ID", u(j.JobID))
	set("SLURM_JOB_UID", u(j.UID))
	set("SLURM_JOB_GID", u(j.GID))
	set("SLURM_JOB_WORK_DIR", slurmproto.CString(j.WorkDir))
	user := slurmproto.CString(j.UserName)
	if user == "" && j.Cred != nil {
		user = slurmproto.CString(j.Cred.PwName)
	}
	if v < slurmproto.Version2411 {
		set("SLURM_JOB_USER", user)
	}
	set("SLURM_JOBID", u(j.JobID))
	if v >= slurmproto.Version2605 && j.Cred != nil && j.Cred.StepID.SLUID != 0 {
		set("SLURM_JOB_SLUID", slurmproto.FormatSLUID(j.Cred.StepID.SLUID))
	}
	if j.HetJobID != 0 && j.HetJobID != slurmproto.NoVal {
		set("SLURM_PACK_JOB_ID", u(j.HetJobID))
		set("SLURM_HET_JOB_ID", u(j.HetJobID))
	}
	set("SLURM_UID", u(j.UID))
	if j.AliasList != "" && v < slurmproto.Version2411 {
		set("SLURM_NODE_ALIASES", slurmproto.CString(j.AliasList))
	}
	if j.Nodes != "" {
		set("SLURM_NODELIST", slurmproto.CString(j.Nodes))
		if v >= slurmproto.Version2411 {
			set("SLURM_JOB_NODELIST", slurmproto.CString(j.Nodes))
		}
	}
	if j.Partition != "" && v < slurmproto.Version2411 {
		set("SLURM_JOB_PARTITION", slurmproto.CString(j.Partition))
	}
	if j.Epilog {
		set("SLURM_SCRIPT_CONTEXT", "epilog_slurmd")
	} else {
		set("SLURM_SCRIPT_CONTEXT", "prolog_slurmd")
	}
	if j.Epilog && j.ExitCode != slurmproto.Infinite {
		ws := syscall.WaitStatus(j.ExitCode)
		code, sig := 0, 0
		if ws.Exited() {
			code = ws.ExitStatus()
		}
		if ws.Signaled() {
			sig = int(ws.Signal())
		}
		set("SLURM_JOB_DERIVED_EC", u(j.DerivedEC))
		set("SLURM_JOB_EXIT_CODE", u(j.ExitCode))
		set("SLURM_JOB_EXIT_CODE2", fmt.Sprintf("%d:%d", code, sig))
	}
	userSet := false
	if c := j.Cred; c != nil {
		opt := func(k, v string) {
			if v != "" {
				set(k, slurmproto.CString(v))
			}
		}
		since := func(rel uint16, f func()) {
			if v >= rel {
				f()
			}
		}
		times := func(k string, t time.Time) {
			if !t.IsZero() && t.Unix() != 0 {
				set(k, strconv.FormatInt(t.Unix(), 10))
			}
		}
		opt("SLURM_JOB_ACCOUNT", c.JobAccount)
		opt("SLURM_JOB_COMMENT", c.JobComment)
		since(slurmproto.Version2411, func() {
			count, kind := uint32(0), "cores"
			switch {
			case c.JobCoreSpec == slurmproto.NoVal16:
			case c.JobCoreSpec&coreSpecThread != 0:
				count, kind = uint32(c.JobCoreSpec&^coreSpecThread), "threads"
			default:
				count = uint32(c.JobCoreSpec)
			}
			set("SLURM_JOB_CORE_SPEC_COUNT", u(count))
			set("SLURM_JOB_CORE_SPEC_TYPE", kind)
		})
		opt("SLURM_JOB_CONSTRAINTS", c.JobConstraints)
		since(slurmproto.Version2411, func() {
			times("SLURM_JOB_END_TIME", c.JobEndTime)
			opt("SLURM_JOB_EXTRA", c.JobExtra)
		})
		if len(c.CPUArray) > 0 {
			set("SLURM_JOB_CPUS_PER_NODE", CompressedCounts(c.CPUArray, c.CPUArrayReps))
		}
		since(slurmproto.Version2411, func() { opt("SLURM_JOB_LICENSES", c.JobLicenses) })
		if c.JobNTasks != 0 {
			set("SLURM_JOB_NTASKS", u(c.JobNTasks))
		}
		if c.JobNHosts != 0 {
			set("SLURM_JOB_NUM_NODES", u(c.JobNHosts))
		}
		since(slurmproto.Version2411, func() { set("SLURM_JOB_OVERSUBSCRIBE", oversubscribeString(v, c.JobOversubscribe)) })
		since(slurmproto.Version2605, func() { set("SLURM_JOB_EXCLUSIVE", exclusiveString(c.JobExclusive)) })
		opt("SLURM_JOB_PARTITION", c.JobPartition)
		since(slurmproto.Version2605, func() { opt("SLURM_JOB_QOS", c.JobQOS) })
		opt("SLURM_JOB_RESERVATION", c.JobReservation)
		if c.JobRestartCnt != slurmproto.Infinite16 {
			set("SLURM_JOB_RESTART_COUNT", strconv.Itoa(int(c.JobRestartCnt)))
		}
		since(slurmproto.Version2605, func() { opt("SLURM_JOB_SELINUX_CONTEXT", c.SELinuxContext) })
		since(slurmproto.Version2411, func() { times("SLURM_JOB_START_TIME", c.JobStartTime) })
		opt("SLURM_JOB_STDERR", c.JobStdErr)
		opt("SLURM_JOB_STDIN", c.JobStdIn)
		opt("SLURM_JOB_STDOUT", c.JobStdOut)
		if v >= slurmproto.Version2411 && c.PwName != "" {
			set("SLURM_JOB_USER", slurmproto.CString(c.PwName))
			userSet = true
		}
	}
	if v >= slurmproto.Version2411 && !userSet {
		// uid_to_string: the name, or the number for an unknown uid.
		set("SLURM_JOB_USER", proc.UserName(j.UID))
	}
	return env
}

// coreSpecThread is CORE_SPEC_THREAD: job_core_spec counts threads.
const coreSpecThread = 0x8000

// oversubscribeString is SLURM_JOB_OVERSUBSCRIBE of a release: 24.11's
// job_share_string, 26.05's job_oversubscribe_string.
func oversubscribeString(v uint16, o uint16) string {
	if v >= slurmproto.Version2605 {
		switch o {
		case 0:
			return "NO"
		case 1:
			return "YES"
		case 2:
			return "OK"
		}
		return "NO"
	}
	switch o {
	case 0:
		return "NO"
	case 1:
		return "YES"
	case 2:
		return "USER"
	case 3:
		return "MCS"
	case 4:
		return "TOPO"
	}
	return "OK"
}

// exclusiveString is 26.05's job_exclusive_display_string.
func exclusiveString(e uint16) string {
	switch e {
	case 1:
		return "NODE"
	case 2:
		return "USER"
	case 3:
		return "MCS"
	case 4:
		return "TOPO"
	}
	return "NO"
}

// CompressedCounts renders Slurm's "2(x3),1" form of per-node counts.
func CompressedCounts(vals []uint16, reps []uint32) string {
	s := ""
	for i, v := range vals {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(int(v))
		if i < len(reps) && reps[i] > 1 {
			s += fmt.Sprintf("(x%d)", reps[i])
		}
	}
	return s
}

// runScript runs Prolog or Epilog as root and returns its raw wait status
// (0 when there is no script).
func (m *Manager) runScript(ctx context.Context, kind, path string, env []string) uint32 {
	if path == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, m.scriptTimeout(kind))
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = env // the daemon's working directory is kept, as slurmd's is
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// run_command: stdin /dev/null opened read-write, stdout and stderr one pipe.
	defer proc.AttachDevNull(cmd, false)()
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		st := uint32(ee.Sys().(syscall.WaitStatus))
		m.log.Error(kind+" failed", "path", path, "status", st, "output", string(out))
		return st
	}
	m.log.Error(kind+" could not run", "path", path, "error", err)
	return 127 << 8
}

// scriptTimeout bounds one Prolog or Epilog run.
func (m *Manager) scriptTimeout(kind string) time.Duration {
	c := m.cfg().Conf
	t := c.PrologEpilogTimeout
	if c.Version >= slurmproto.Version2605 {
		// 26.05 times the two apart (PrologTimeout, EpilogTimeout).
		if t = c.PrologTimeout; kind == "epilog" {
			t = c.EpilogTimeout
		}
	}
	if t != 0 && t != slurmproto.NoVal16 && t != slurmproto.Infinite16 {
		return time.Duration(t) * time.Second
	}
	return ScriptTimeoutUnset
}

// runJobScripts is prep_script_slurmd.c's _run_spank_job_script and
// script: the SPANK job_script stack (if a plugin has the hook), then the
// real scripts, both always; the real status wins when both fail.
func (m *Manager) runJobScripts(ctx context.Context, kind string, j scriptJob) uint32 {
	env := m.scriptEnv(j)
	sctx, cancel := context.WithTimeout(ctx, m.scriptTimeout(kind))
	spankStatus := m.runSpankScript(sctx, kind, j, env)
	cancel()
	if st := m.runScripts(ctx, kind, env); st != 0 {
		return st
	}
	return spankStatus
}

// runScripts runs a job's Prolog or Epilog scripts: 22.05 has one; from
// 24.11 every Prolog=/Epilog= line counts, each may be a glob, and they run
// in order until one fails (prep/script _run_subpath_command). The status
// is the failing one's, else 0.
func (m *Manager) runScripts(ctx context.Context, kind string, env []string) uint32 {
	c := m.cfg().Conf
	one, many := c.Prolog, c.Prologs
	if kind == "epilog" {
		one, many = c.Epilog, c.Epilogs
	}
	if c.Version < slurmproto.Version2411 || len(many) == 0 {
		return m.runScript(ctx, kind, one, env)
	}
	for _, entry := range many {
		paths := []string{entry}
		if strings.ContainsAny(entry, "*?[") {
			var err error
			if paths, err = filepath.Glob(entry); err != nil {
				m.log.Error("unable to create list of paths", "kind", kind, "pattern", entry, "error", err)
				return 127 << 8
			}
		}
		for _, p := range paths {
			if st := m.runScript(ctx, kind, p, env); st != 0 {
				return st
			}
		}
	}
	return 0
}

// nodeIndex is this node's position in a job's node list, -1 when the
// list is unreadable or lacks the node.
func (m *Manager) nodeIndex(nodes string) int {
	h, err := hostlist.Parse(slurmproto.CString(nodes))
	if err != nil {
		return -1
	}
	return h.Find(m.cfg().NodeName)
}
