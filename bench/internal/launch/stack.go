package launch

import (
	"fmt"
	"os"
	"path/filepath"
)

// Releases the bench runs, and auth types.
const (
	Release2205 = "22.05" // the host's Debian 12 packages
	Release2411 = "24.11" // Debian trixie's packages in the 24.11 chroot

	AuthMunge = "munge" // AuthType=auth/munge, CredType=cred/munge, a private munged
	AuthSlurm = "slurm" // AuthType=auth/slurm, CredType=cred/slurm, a fresh slurm.key, no munged
)

// ChrootBase holds one chroot per release newer than the host's (scripts/chroots.sh).
const ChrootBase = "/var/lib/tiee/chroots"

// Stack is the Slurm release and auth type a bench cluster runs: which slurmctld, stock slurmd
// and client commands, and how every RPC is signed.
type Stack struct {
	Release string // Release2205 or Release2411
	Auth    string // AuthMunge or AuthSlurm
}

// DefaultStack is today's bench: the host's 22.05 with munge.
var DefaultStack = Stack{Release: Release2205, Auth: AuthMunge}

// ParseStack checks a release and auth type pair.
func ParseStack(release, authType string) (Stack, error) {
	s := Stack{Release: release, Auth: authType}
	switch release {
	case Release2205, Release2411:
	default:
		return s, fmt.Errorf("launch: release %q: want %s or %s", release, Release2205, Release2411)
	}
	switch authType {
	case AuthMunge, AuthSlurm:
	default:
		return s, fmt.Errorf("launch: auth %q: want %s or %s", authType, AuthMunge, AuthSlurm)
	}
	if release == Release2205 && authType == AuthSlurm {
		return s, fmt.Errorf("launch: auth/slurm does not exist in Slurm 22.05 (it came with 23.11): use -release %s", Release2411)
	}
	if release == Release2411 && authType == AuthMunge {
		// Not wired: a 24.11 reply carries no credential, and the munge report (ceiling, Amdahl
		// IO_wait) counts one encode per RPC.
		return s, fmt.Errorf("launch: the bench runs Slurm %s with auth/slurm only (-auth %s)", Release2411, AuthSlurm)
	}
	return s, nil
}

// String is "22.05/munge".
func (s Stack) String() string { return s.Release + "/" + s.Auth }

// Tag names the stack's output directory and RFC fragments: "" for DefaultStack (whose
// outputs keep their names), else "24.11-slurm".
func (s Stack) Tag() string {
	if s == DefaultStack || s == (Stack{}) {
		return ""
	}
	return s.Release + "-" + s.Auth
}

// Label is the stack as every table and plot names it: "Slurm 24.11, auth/slurm".
func (s Stack) Label() string { return "Slurm " + s.Release + ", auth/" + s.Auth }

// Protocol is the release's SLURM_PROTOCOL_VERSION, the header version of every request the
// bench's client sends.
func (s Stack) Protocol() uint16 {
	if s.Release == Release2411 {
		return 0x2A00
	}
	return 0x2600
}

// Root is the chroot the release's binaries run in ("" for the host's 22.05 and the zero
// Stack).
func (s Stack) Root() string {
	if s.Release == Release2205 || s.Release == "" {
		return ""
	}
	return filepath.Join(ChrootBase, s.Release)
}

// UsesMunged reports whether the stack signs RPCs through munged (the zero Stack does).
func (s Stack) UsesMunged() bool { return s.Auth != AuthSlurm }

// checkRoot says what is missing for a chroot stack: the chroot, its mounts, and the
// repository's binaries seen from inside (scripts/chroots.sh binds the repository at its own
// path).
func (s Stack) checkRoot(binaries ...string) error {
	root := s.Root()
	if root == "" {
		return nil
	}
	fix := fmt.Sprintf("run scripts/chroots.sh %s from this repository", s.Release)
	if _, err := os.Stat(filepath.Join(root, ".tiee-ready")); err != nil {
		return fmt.Errorf("launch: no Slurm %s chroot at %s (%s): %w", s.Release, root, fix, err)
	}
	if _, err := os.Stat(filepath.Join(root, "proc", "self")); err != nil {
		return fmt.Errorf("launch: the Slurm %s chroot %s is not mounted (%s): %w", s.Release, root, fix, err)
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(root, b)); err != nil {
			return fmt.Errorf("launch: %s is not visible inside %s (%s): %w", b, root, fix, err)
		}
	}
	for _, d := range []string{"run/slurm", "run/slurmctld"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				return fmt.Errorf("launch: %s: %w", filepath.Join(root, d), err)
			}
		}
	}
	return nil
}

// nsScript runs inside a private mount namespace (unshare -m --propagation private): it binds
// the process's own directories over the chroot's /run/slurm and /run/slurmctld, where
// auth/slurm daemons put their SACK sockets at fixed paths, then execs the command in the
// chroot. Every exec keeps the pid, so the pid the bench started is the daemon's.
const nsScript = `set -e; mount --bind "$1" "$3/run/slurm"; mount --bind "$2" "$3/run/slurmctld"; shift 3; exec chroot "$@"`

// wrap returns the argv that runs argv for the stack: as is on the host, else in the chroot
// inside a private mount namespace with runSlurm and runSlurmctld bound over its SACK
// directories. chrootOpts go before the root (e.g. --userspec).
func (s Stack) wrap(runSlurm, runSlurmctld string, chrootOpts []string, argv ...string) []string {
	root := s.Root()
	if root == "" {
		return argv
	}
	out := []string{"unshare", "-m", "--propagation", "private", "sh", "-c", nsScript, "sh", runSlurm, runSlurmctld, root}
	out = append(out, chrootOpts...)
	out = append(out, root)
	return append(out, argv...)
}
