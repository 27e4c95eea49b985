package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// spankBuildTimeout bounds one gcc run of BuildSpankPlugin.
const spankBuildTimeout = 60 * time.Second

// BuildSpankPlugin compiles the C SPANK plugin src (a path) for a Slurm release
// ("" is $TIEE_SLURM_RELEASE, else 22.05) and returns the shared object's path:
//
//	gcc -shared -fPIC -o <dir>/<name>.so src -I<dir>/include
//
// where <dir>/include/slurm is the release's own <root>/usr/include/slurm, so that
// the plugin's plugin_version (SLURM_VERSION_NUMBER of slurm_version.h) is that
// release's: slurmstepd and srun refuse a SPANK plugin of another major.minor. Only
// the Slurm headers come from the release's root (the C library's are the host's,
// whose glibc is the oldest of all roots). <dir> is a new world-readable directory
// under /tmp, the same path inside every root, removed at the end of the test; the
// plugin is loaded by root (slurmd, slurmstepd) and by the test user (srun, sbatch).
// Any goroutine.
func BuildSpankPlugin(t testing.TB, release, src string) string {
	t.Helper()
	rel, err := LookupRelease(release)
	if release == "" {
		rel, err = SelectedRelease()
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	if repo, err := RepoRoot(); err != nil {
		t.Fatalf("%v", err)
	} else if err := ensureChroot(repo, rel); err != nil {
		t.Fatalf("%v", err)
	}
	hdr := rel.HostPath("/usr/include/slurm")
	if _, err := os.Stat(filepath.Join(hdr, "spank.h")); err != nil {
		t.Fatalf("cluster: no spank.h for Slurm %s (%v): install libslurm-dev / slurm-wlm's headers (scripts/install-deps.sh; scripts/chroots.sh %s)", rel.Name, err, rel.Name)
	}
	dir, err := os.MkdirTemp("/tmp", "ti-spank-")
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("cluster: chmod %s: %v", dir, err)
	}
	inc := filepath.Join(dir, "include")
	if err := os.Mkdir(inc, 0o755); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	if err := os.Symlink(hdr, filepath.Join(inc, "slurm")); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	so := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".c")+".so")
	ctx, cancel := context.WithTimeout(context.Background(), spankBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gcc", "-shared", "-fPIC", "-Wall", "-O1", "-o", so, src, "-I"+inc)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster: build SPANK plugin %s for Slurm %s: %v\n%s", src, rel.Name, err, out)
	}
	if err := os.Chmod(so, 0o755); err != nil {
		t.Fatalf("cluster: chmod %s: %v", so, err)
	}
	return so
}

// SpankPluginDir is the directory of Debian's own SPANK plugins (spank_pbs.so, ...)
// as a path inside every release's root.
const SpankPluginDir = "/usr/lib/x86_64-linux-gnu/slurm-wlm"

// StockSpankPlugin returns the path, inside the release's root, of one of Debian's
// SPANK plugins of that release ("spank_pbs.so"); fatal if it is not installed.
func StockSpankPlugin(t testing.TB, release, name string) string {
	t.Helper()
	rel, err := LookupRelease(release)
	if release == "" {
		rel, err = SelectedRelease()
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(SpankPluginDir, name)
	if _, err := os.Stat(rel.HostPath(p)); err != nil {
		t.Fatalf("cluster: %s of Slurm %s: %v (slurm-wlm-basic-plugins; scripts/install-deps.sh)", name, rel.Name, fmt.Sprint(err))
	}
	return p
}
