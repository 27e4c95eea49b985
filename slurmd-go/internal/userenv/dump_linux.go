package userenv

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
)

// Step manager subcommands this package implements.
const (
	// CmdGetenv ("slurmstepd-go getenv") is run inside su: Dump.
	CmdGetenv = "getenv"
	// CmdSuExec ("slurmstepd-go su-exec [-proc] <su> <argv...>") is su's
	// parent-side setup: raise the open-files limit as slurmd has it, with
	// -proc mount the new namespace's /proc, then exec su.
	CmdSuExec = "su-exec"
)

// Dump writes what "slurmstepd getenv" prints (print_rlimits, then
// environ): SLURM_RLIMIT_<name>=<soft limit> per limit, then every
// NAME=value of the environment, one a line.
func Dump(w io.Writer) error {
	for _, rl := range proc.RlimitTable {
		var r unix.Rlimit
		if err := unix.Getrlimit(rl.Resource, &r); err != nil {
			continue
		}
		if rl.Resource == unix.RLIMIT_NOFILE {
			// The Go runtime raised our own soft limit at start; the
			// shell that ran us holds the one we were given.
			var p unix.Rlimit
			if unix.Prlimit(os.Getppid(), unix.RLIMIT_NOFILE, nil, &p) == nil && p.Max == r.Max {
				r = p
			}
		}
		if _, err := fmt.Fprintf(w, "SLURM_RLIMIT_%s=%d\n", rl.Name, r.Cur); err != nil {
			return err
		}
	}
	for _, kv := range os.Environ() {
		if _, err := fmt.Fprintf(w, "%s\n", kv); err != nil {
			return err
		}
	}
	return nil
}

// SuExec is CmdSuExec's body; it returns only on failure (exit status 1,
// as stock's child).
func SuExec(args []string) int {
	mountProc := len(args) > 0 && args[0] == "-proc"
	if mountProc {
		args = args[1:]
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: slurmstepd-go su-exec [-proc] <su> <argv...> (run by slurmd-go)")
		return 2
	}
	// slurmd runs with RLIMIT_NOFILE raised to its hard limit
	// (rlimits_use_max_nofile) and su inherits that. Setting it here also
	// keeps the Go runtime from restoring the lower one at exec.
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil {
		r.Cur = r.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
	if mountProc {
		// This process is PID 1 of a new PID namespace: a /proc of its
		// own, so the login scripts see coherent PIDs.
		if unix.Mount("none", "/proc", "", unix.MS_PRIVATE|unix.MS_REC, "") != nil ||
			unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_NODEV, "") != nil {
			return 1
		}
	}
	_ = syscall.Exec(args[0], args[1:], os.Environ())
	return 1
}
