package privcheck

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// Need is one privilege and why the daemon needs it.
type Need struct {
	Name string // "CAP_SETUID", or "cgroup"
	Cap  int    // capability number; -1 for a non-capability need
	For  string // what needs it, as the error says
	// Required: without it jobs fail. Otherwise a feature degrades.
	Required bool
}

func (n Need) String() string { return n.Name + " (" + n.For + ")" }

// Capability numbers (linux/capability.h).
const (
	capChown       = 0
	capDacOverride = 1
	capFowner      = 3
	capKill        = 5
	capSetgid      = 6
	capSetuid      = 7
	capSysPtrace   = 19
	capSysAdmin    = 21
	capSysNice     = 23
)

// Needs are the privileges a root daemon with configuration conf needs.
func Needs(conf *slurmconf.Config) []Need {
	n := []Need{
		{"CAP_SETUID", capSetuid, "run tasks as their users", true},
		{"CAP_SETGID", capSetgid, "run tasks with their users' groups", true},
		{"CAP_KILL", capKill, "signal other users' tasks: scancel, time limits", true},
		{"CAP_CHOWN", capChown, "give job files and directories to their users", true},
		{"CAP_DAC_OVERRIDE", capDacOverride, "open output files and spool entries of other users", true},
		{"CAP_FOWNER", capFowner, "set modes on other users' job files", true},
		{"CAP_SYS_PTRACE", capSysPtrace, "read other users' tasks for sstat and accounting", false},
		{"CAP_SYS_NICE", capSysNice, "apply a negative --nice and CPU binding", false},
	}
	ns := conf.JobContainerType != "" && conf.JobContainerType != slurmconf.DefaultJobContainerType
	n = append(n, Need{"CAP_SYS_ADMIN", capSysAdmin, "mount namespaces of " + conf.JobContainerType, ns})
	if !ns {
		n[len(n)-1].For = "mount namespaces (JobContainerType), bind mounts of SPANK plugins"
	}
	return n
}

// UsesCgroup reports whether conf puts steps in cgroups.
func UsesCgroup(conf *slurmconf.Config) bool {
	return conf.ProctrackType == "proctrack/cgroup" || strings.Contains(conf.TaskPlugin, "task/cgroup")
}

// Effective is the process's effective capability set (CapEff of
// /proc/self/status).
func Effective() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("privcheck: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("privcheck: CapEff %q: %w", v, err)
			}
			return c, nil
		}
	}
	return 0, errors.New("privcheck: no CapEff in /proc/self/status")
}

// Missing splits the capability needs eff lacks into required and
// optional ones.
func Missing(eff uint64, needs []Need) (required, optional []Need) {
	for _, n := range needs {
		if n.Cap < 0 || eff&(1<<uint(n.Cap)) != 0 {
			continue
		}
		if n.Required {
			required = append(required, n)
		} else {
			optional = append(optional, n)
		}
	}
	return required, optional
}

// Writable checks that each cgroup hierarchy in dirs (mount points) can be
// written: a read-only mount (no delegation) is a missing privilege.
func Writable(dirs []string) []Need {
	sort.Strings(dirs)
	var out []Need
	for _, d := range dirs {
		if err := unix.Access(d, unix.W_OK); err != nil {
			out = append(out, Need{Name: "cgroup " + d, Cap: -1, Required: true,
				For: fmt.Sprintf("not writable (%v): delegate cgroup v2 to the pod or mount the hierarchy read-write", err)})
		}
	}
	return out
}

// Error lists the required privileges that are missing.
type Error struct{ Missing []Need }

func (e *Error) Error() string {
	s := make([]string, len(e.Missing))
	for i, n := range e.Missing {
		s[i] = n.String()
	}
	return "missing privilege: " + strings.Join(s, "; ") + "; add the capabilities to the pod (chart: capabilities) or run it privileged"
}
