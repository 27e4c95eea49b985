//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// TestConfigless: a node started with --conf-server and no slurm.conf of
// its own fetches its files from slurmctld,
// caches them in <SlurmdSpoolDir>/conf-cache, registers and runs jobs as
// an ordinary user; a reconfigure pushes the changed slurm.conf into the
// cache. The same on both implementations, in every release and auth.
func TestConfigless(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 2, Unstarted: []string{"t2"},
		ExtraConf: []string{"SlurmctldParameters=enable_configless"}})
	if c.Auth == cluster.AuthSlurm {
		// what stock's fetch reads before there is a slurm.conf
		c.SetNodeEnv("t2", "SLURM_SACK_KEY="+c.SlurmKeyPath())
	}
	c.StartNodeConfigless(t, "t2")
	c.WaitNodes(t, "idle", []string{"t2"}, nodeBackIdleTimeout)
	if out := strings.TrimSpace(c.MustRun(t, cluster.TestUser, "srun", "-w", "t2", "id", "-un")); out != cluster.TestUser {
		t.Fatalf("srun on the configless node: %q", out)
	}
	// The cache, in the spool directory (Dir is the same path in a chroot).
	cache := filepath.Join(c.Dir, "spool", "t2", "conf-cache")
	orig, err := os.ReadFile(c.ConfPath)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "slurm.conf")); err != nil || string(b) != string(orig) {
		t.Fatalf("cached slurm.conf (%s): %v\n%s\nwant slurmctld's\n%s", cache, err, b, orig)
	}
	c.SetConf(t, "SlurmctldParameters=enable_configless", "MinJobAge=301")
	c.MustRun(t, "", "scontrol", "reconfigure")
	c.WaitFor(t, "the pushed slurm.conf in the cache", nodeBackIdleTimeout, func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(cache, "slurm.conf"))
		return strings.Contains(string(b), "MinJobAge=301"), ""
	})
	c.WaitNodes(t, "idle", []string{"t2"}, nodeBackIdleTimeout)
	c.MustRun(t, cluster.TestUser, "srun", "-w", "t2", "true")
}
