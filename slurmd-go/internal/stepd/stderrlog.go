package stepd

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Slurm's log levels (slurmconf.LogLevel), as srun --slurmd-debug and
// SlurmdDebug number them.
const (
	logQuiet   = int(slurmconf.LogQuiet)
	logFatal   = int(slurmconf.LogFatal)
	logError   = int(slurmconf.LogError)
	logInfo    = int(slurmconf.LogInfo)
	logVerbose = int(slurmconf.LogVerbose)
	logDebug   = int(slurmconf.LogDebug)
	logDebug2  = int(slurmconf.LogDebug2)
	logDebug3  = int(slurmconf.LogDebug3)
)

// logLevelName is log_num2string.
func logLevelName(l int) string {
	if l < 0 {
		return "unknown"
	}
	return slurmconf.LogLevel(l).String()
}

// logPrefix is log.c's level prefix of a line.
func logPrefix(level int) string {
	switch level {
	case logFatal:
		return "fatal: "
	case logError:
		return "error: "
	case logDebug:
		return "debug:  "
	case logDebug2:
		return "debug2: "
	case logDebug3:
		return "debug3: "
	}
	return ""
}

// stderrLevel is _slurmd_job_log_init's level for the step manager's lines
// on task 0's stderr (srun's stderr) from srun --slurmd-debug. 22.05 adds
// the value to error and caps at debug3; from 24.11 it is the level itself,
// capped at debug2, and honoured only for root and SlurmUser (refused
// says an ordinary user asked for more than error).
func stderrLevel(version, debug uint16, uid, slurmUser uint32) (level int, refused bool) {
	if version < slurmproto.Version2411 {
		return min(logError+int(debug), logDebug3), false
	}
	level = logError
	if int(debug) > logError {
		if uid == 0 || uid == slurmUser {
			level = int(debug)
		} else {
			refused = true
		}
	}
	return min(level, logDebug2), refused
}

// stepdLog is one of slurmstepd's own log lines: it goes to the log file
// and, at or below the step's stderr level, to task 0's stderr in stock's
// form ("slurmstepd-<node>: <level prefix><message>", from 26.05
// "[<time>] <level prefix><message>").
func (s *Step) stepdLog(level int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	switch {
	case level <= logError:
		s.log.Error(msg)
	case level <= logVerbose:
		s.log.Info(msg)
	case level == logDebug:
		s.log.Debug(msg)
	default:
		s.log.Trace(msg)
	}
	s.stepdStderr(level, msg)
}

// stepdStderr is the job's-stderr half of stepdLog.
func (s *Step) stepdStderr(level int, msg string) {
	s.mu.Lock()
	f, lim := s.stderr, max(s.errLevel, logError)
	s.mu.Unlock()
	if f == nil || level > lim {
		return
	}
	prefix := "slurmstepd-" + s.spec.NodeName + ": "
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		// 26.05's step manager logs to the job's stderr with a timestamp.
		prefix = "[" + logTimestamp(time.Now()) + "] "
	}
	_, _ = f.WriteString(prefix + logPrefix(level) + msg + "\n")
}

// jobLogInit is _slurmd_job_log_init once the step's I/O is set up: from
// now on the step manager's lines at srun --slurmd-debug's level reach
// task 0's stderr.
func (s *Step) jobLogInit() {
	lvl, refused := stderrLevel(s.spec.ProtocolVersion, s.launch.SlurmdDebug, s.uid, s.spec.SlurmUserUID)
	if refused {
		// Logged before stock's log_alter: the log file only.
		s.log.Error("Use of --slurmd-debug is allowed only for root and SlurmUser, ignoring it", "uid", s.uid, "slurm_user_uid", s.spec.SlurmUserUID)
	}
	s.mu.Lock()
	s.errLevel = lvl
	s.mu.Unlock()
	s.stepdLog(logVerbose, "debug levels are stderr='%s', logfile='%s', syslog='%s'",
		logLevelName(lvl), logLevelName(s.spec.LogLevel), logLevelName(s.spec.SyslogLevel))
}

// logTimestamp is the "[%M]" line prefix's time under the default
// LogTimeFormat (iso8601_ms).
func logTimestamp(t time.Time) string { return t.Format("2006-01-02T15:04:05.000") }

// eventTimestamp is log_timestamp: seconds only under the default
// LogTimeFormat.
func eventTimestamp(t time.Time) string { return t.Format("2006-01-02T15:04:05") }

// logTaskExit is mgr.c's _log_task_exit.
func (s *Step) logTaskExit(gtid uint32, pid int, st syscall.WaitStatus) {
	switch {
	case uint32(st)&0xff == uint32(slurmproto.SigOOM):
		s.stepdLog(logVerbose, "task %d (%d) Out Of Memory (OOM)", gtid, pid)
	case st.Exited():
		s.stepdLog(logVerbose, "task %d (%d) exited with exit code %d.", gtid, pid, st.ExitStatus())
	case st.Signaled():
		core := ""
		if st.CoreDump() {
			core = " (core dumped)"
		}
		s.stepdLog(logVerbose, "task %d (%d) exited. Killed by signal %d%s.", gtid, pid, int(st.Signal()), core)
	default:
		s.stepdLog(logVerbose, "task %d (%d) exited with status 0x%04x.", gtid, pid, uint32(st))
	}
}

func (s *Step) stderrLevel() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.errLevel, logError)
}

// noneHookLogs: slurmd-go's task handling is task/none's, whose hooks (and
// those of mpi/none and switch/none) 22.05 logs at debug; 24.11 has no such
// plugins any more, and other TaskPlugin values get no such lines.
func (s *Step) noneHookLogs() bool {
	return s.spec.ProtocolVersion < slurmproto.Version2411 &&
		(s.spec.TaskPlugin == "" || s.spec.TaskPlugin == "task/none")
}

// mpiNone is whether the step runs under mpi/none (no MPI plugin).
func mpiNone(id uint32) bool {
	return id == 0 || id == slurmproto.NoVal || id == slurmproto.MPIPluginNone
}

// unkillableTimeout is UnkillableStepTimeout (60 s when unset).
func (s *Step) unkillableTimeout() time.Duration {
	if s.spec.UnkillableStepTimeout > 0 {
		return s.spec.UnkillableStepTimeout
	}
	return 60 * time.Second
}

// logStateChange is 26.05's set_job_state line (job_manager's transitions).
func (s *Step) logStateChange(from, to string) {
	if s.spec.ProtocolVersion >= slurmproto.Version2605 {
		s.stepdLog(logDebug2, "job_manager: setting step state %s -> %s", from, to)
	}
}

// Binding bits of a launch's cpu_bind_type and mem_bind_type (slurm.h
// CPU_BIND_*, MEM_BIND_*) that task/affinity would apply: verbose, none and
// the automatic-binding hints are left out.
const (
	cpuBindApplied = 0x0002 | 0x0004 | 0x0008 | 0x0010 | 0x0040 | 0x0080 | 0x0100 | 0x0200 | 0x0400 | 0x0800
	memBindApplied = 0x04 | 0x08 | 0x10 | 0x20
)

// cpufreqDir is where the kernel exposes CPU frequency scaling, which stock's
// cpu_freq needs to act on --cpu-freq.
var cpufreqDir = "/sys/devices/system/cpu/cpu0/cpufreq"

// sayUnprovided tells the step's user, on its stderr, what the launch asks
// of plugins slurmd-go does not have, where stock would apply it: CPU and
// memory binding under TaskPlugin=task/affinity, a CPU frequency on a node
// whose kernel can set one (RFC 4). Elsewhere stock does nothing either,
// and neither says anything.
func (s *Step) sayUnprovided() {
	m := s.launch
	if strings.Contains(s.spec.TaskPlugin, "affinity") {
		if m.CPUBindType&cpuBindApplied != 0 {
			s.stepdLog(logError, "task/affinity is not provided by slurmd-go: --cpu-bind is not applied, tasks run unbound")
		}
		if m.MemBindType&memBindApplied != 0 {
			s.stepdLog(logError, "task/affinity is not provided by slurmd-go: --mem-bind is not applied")
		}
	}
	asked := func(v uint32) bool { return v != 0 && v != slurmproto.NoVal }
	if asked(m.CPUFreqMin) || asked(m.CPUFreqMax) || asked(m.CPUFreqGov) {
		if _, err := os.Stat(cpufreqDir); err == nil {
			s.stepdLog(logError, "cpu_freq is not provided by slurmd-go: --cpu-freq is not applied")
		}
	}
}
