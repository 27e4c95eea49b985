package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Release and auth knobs.
const (
	EnvRelease   = "TIEE_SLURM_RELEASE" // "22.05" (default), "24.11" or "26.05"
	EnvAuth      = "TIEE_AUTH"          // "munge" (default) or "slurm" (24.11 and later)
	EnvChrootDir = "TIEE_CHROOT_DIR"    // where scripts/chroots.sh keeps the chroots
)

// Auth values: slurm.conf's AuthType/CredType pair.
const (
	AuthMunge = "munge" // auth/munge + cred/munge, the host's munged
	AuthSlurm = "slurm" // auth/slurm + cred/slurm, a per-cluster slurm.key, no munged
)

// DefaultRelease is the host's own Slurm (Debian 12).
const DefaultRelease = "22.05"

// defaultChrootDir is scripts/chroots.sh's default.
const defaultChrootDir = "/var/lib/tiee/chroots"

// chrootSetupTimeout bounds scripts/chroots.sh: mounting takes milliseconds, a first
// build (debootstrap + packages) about 1.5 min on this machine.
const chrootSetupTimeout = 5 * time.Minute

// Release is one Slurm release the harness runs: its wire protocol version and where
// its binaries live. Every Slurm process of a cluster of a chroot release (slurmctld,
// the node daemons, every client command) runs inside that chroot.
type Release struct {
	Name string // "24.11"
	// ProtocolVersion is SLURM_PROTOCOL_VERSION (src/common/slurm_protocol_common.h):
	// what this release's daemons put in every header they send.
	ProtocolVersion uint16
	// MinProtocolVersion is SLURM_MIN_PROTOCOL_VERSION: the oldest header its daemons
	// accept (three releases back).
	MinProtocolVersion uint16
	// Suite is the Debian suite of its chroot; "" for the host's release.
	Suite string
	// AuthSlurm tells whether auth/slurm exists (new in 23.11).
	AuthSlurm bool
}

// releases is every release the harness knows; the protocol numbers were read from
// each tree's slurm_protocol_common.h and seen on the wire
// (shared/reference/slurm-24.11-26.05.md §3).
var releases = map[string]Release{
	"22.05": {Name: "22.05", ProtocolVersion: 0x2600, MinProtocolVersion: 0x2400},
	"24.11": {Name: "24.11", ProtocolVersion: 0x2A00, MinProtocolVersion: 0x2700, Suite: "trixie", AuthSlurm: true},
	"26.05": {Name: "26.05", ProtocolVersion: 0x2D00, MinProtocolVersion: 0x2A00, Suite: "sid", AuthSlurm: true},
}

// LookupRelease returns the named release ("" is DefaultRelease).
func LookupRelease(name string) (Release, error) {
	if name == "" {
		name = DefaultRelease
	}
	r, ok := releases[name]
	if !ok {
		var names []string
		for n := range releases {
			names = append(names, n)
		}
		sort.Strings(names)
		return Release{}, fmt.Errorf("cluster: unknown Slurm release %q (%s: want one of %s)", name, EnvRelease, strings.Join(names, ", "))
	}
	return r, nil
}

// SelectedRelease is the release named by $TIEE_SLURM_RELEASE (default 22.05).
func SelectedRelease() (Release, error) { return LookupRelease(os.Getenv(EnvRelease)) }

// SelectedAuth is $TIEE_AUTH (default munge), checked against the release.
func SelectedAuth(r Release) (string, error) { return checkAuth(r, os.Getenv(EnvAuth)) }

func checkAuth(r Release, auth string) (string, error) {
	switch auth {
	case "", AuthMunge:
		return AuthMunge, nil
	case AuthSlurm:
		if !r.AuthSlurm {
			return "", fmt.Errorf("cluster: %s=%s: Slurm %s has no auth/slurm (24.11 and later do)", EnvAuth, auth, r.Name)
		}
		return AuthSlurm, nil
	default:
		return "", fmt.Errorf("cluster: unknown %s=%q (want %q or %q)", EnvAuth, auth, AuthMunge, AuthSlurm)
	}
}

// Root is the release's chroot directory, "" for the host's release.
func (r Release) Root() string {
	if r.Suite == "" {
		return ""
	}
	base := os.Getenv(EnvChrootDir)
	if base == "" {
		base = defaultChrootDir
	}
	return filepath.Join(base, r.Name)
}

// HostPath is where path, a path inside the release's root, is on the host.
func (r Release) HostPath(path string) string { return filepath.Join(r.Root(), path) }

// Command is a command that runs argv inside the release's root as root, in "/",
// without any cluster's mount namespace: for what needs no daemon (`slurmd -C`,
// `slurmd -V`). argv[0] is a path inside the root or a name looked up in CleanPath
// there. The root is built and mounted first if needed (scripts/chroots.sh).
func (r Release) Command(argv ...string) (*exec.Cmd, error) {
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := ensureChroot(repo, r); err != nil {
		return nil, err
	}
	return wrapCommand(execSpec{root: r.Root(), argv: argv})
}

var (
	chrootMu    sync.Mutex
	chrootReady = map[string]bool{} // release -> scripts/chroots.sh succeeded; guarded by chrootMu
)

// ensureChroot runs scripts/chroots.sh for the release once per test binary: it builds
// the chroot if missing and mounts /proc, /sys, /dev, /tmp, /run/munge and this
// repository inside (idempotent, safe to run concurrently).
func ensureChroot(repo string, r Release) error {
	if r.Root() == "" {
		return nil
	}
	chrootMu.Lock()
	defer chrootMu.Unlock()
	if chrootReady[r.Name] {
		return nil
	}
	cmd := exec.Command("bash", filepath.Join(repo, "scripts", "chroots.sh"), r.Name)
	out, err := runBounded(cmd, chrootSetupTimeout)
	if err != nil {
		return fmt.Errorf("cluster: scripts/chroots.sh %s: %w: %s", r.Name, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := lines[len(lines)-1]; got != r.Root() {
		return fmt.Errorf("cluster: scripts/chroots.sh %s printed root %q, want %q (%s differs between the script and the harness?)", r.Name, got, r.Root(), EnvChrootDir)
	}
	chrootReady[r.Name] = true
	return nil
}

// stockVersion is the release's `slurmd -V` ("slurm-wlm 24.11.5" -> "24.11.5"), checked
// to belong to the release.
func stockVersion(r Release) (string, error) {
	cmd, err := r.Command(StockSlurmd, "-V")
	if err != nil {
		return "", err
	}
	out, err := runBounded(cmd, hardwareTimeout)
	if err != nil {
		return "", fmt.Errorf("cluster: %s -V (release %s): %w: %s", StockSlurmd, r.Name, err, out)
	}
	// Debian's build prints its package name: "slurm-wlm 24.11.5".
	f := strings.Fields(out)
	if len(f) != 2 || (f[0] != "slurm" && f[0] != "slurm-wlm") || !strings.HasPrefix(f[1], r.Name+".") {
		return "", fmt.Errorf("cluster: %s -V of release %s printed %q, want \"slurm-wlm %s.N\"", StockSlurmd, r.Name, strings.TrimSpace(out), r.Name)
	}
	return f[1], nil
}

// lookPathIn finds name as exec.LookPath would inside root ("" = the host), searching
// CleanPath; it returns the path as seen inside root.
func lookPathIn(root, name string) (string, error) {
	if root == "" {
		return exec.LookPath(name)
	}
	if strings.Contains(name, "/") {
		if !isExecutable(filepath.Join(root, name)) {
			return "", fmt.Errorf("cluster: %s is not an executable inside %s", name, root)
		}
		return name, nil
	}
	for _, d := range filepath.SplitList(CleanPath) {
		p := filepath.Join(d, name)
		if isExecutable(filepath.Join(root, p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("cluster: %s not found in %s inside %s", name, CleanPath, root)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
