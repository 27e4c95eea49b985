package gres

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// stockDev is where testdata/stock/capture.sh made the device files the
// cases name; the unit test pretends they exist.
const stockDev = "/tmp/tiee-gres-dev/"

var releases = []struct {
	name string
	v    uint16
}{{"22.05", slurmconf.V2205}, {"24.11", slurmconf.V2411}, {"26.05", slurmconf.V2605}}

// caseDir lays a testdata/stock case out in a fresh directory as
// capture.sh does (its *.conf files, slurm.conf from slurm.conf.sh).
func caseDir(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "stock", name)
	dir := t.TempDir()
	confs, _ := filepath.Glob(filepath.Join(src, "*.conf"))
	for _, f := range confs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("bash", filepath.Join("testdata", "slurm.conf.sh"), dir).Output()
	if err != nil {
		t.Fatalf("slurm.conf.sh: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func caseNode(name string) string {
	if b, err := os.ReadFile(filepath.Join("testdata", "stock", name, "node")); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "t1"
}

// loadCase runs Load as slurmd-go does for the case's node under release v,
// the options read from the case's slurm.conf.
func loadCase(t *testing.T, dir, node string, v uint16, exists func(string) error) (*Node, error) {
	t.Helper()
	conf, err := slurmconf.Load(filepath.Join(dir, "slurm.conf"), slurmconf.Options{Version: v})
	if err != nil {
		t.Fatalf("slurm.conf: %v", err)
	}
	n, ok := conf.Node(node)
	if !ok {
		t.Fatalf("no node %s", node)
	}
	return Load(context.Background(), Options{ConfPath: filepath.Join(dir, "gres.conf"), NodeName: node,
		CPUs: 2, Version: v, GresTypes: conf.GresTypes, NodeGres: n.Gres, Exists: exists})
}

// fakeDevs says every file under stockDev exists.
func fakeDevs(p string) error {
	if strings.HasPrefix(p, stockDev) {
		return nil
	}
	_, err := os.Stat(p)
	return err
}

// TestLoad_MatchesStock holds Load's `slurmd -G` lines against what each
// release's stock slurmd -G printed for the same gres.conf and slurm.conf
// (testdata/stock/<case>/stock-<release>.txt, capture.sh).
func TestLoad_MatchesStock(t *testing.T) {
	cases, err := os.ReadDir(filepath.Join("testdata", "stock"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		for _, rel := range releases {
			t.Run(c.Name()+"/"+rel.name, func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join("testdata", "stock", c.Name(), "stock-"+rel.name+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				dir := caseDir(t, c.Name())
				n, err := loadCase(t, dir, caseNode(c.Name()), rel.v, fakeDevs)
				got := strings.Join(PrintLines(n, err), "\n")
				got = strings.ReplaceAll(got, dir, "<dir>")
				if w := strings.TrimRight(string(want), "\n"); got != w {
					t.Errorf("slurmd-go:\n%s\nstock %s:\n%s", got, rel.name, w)
				}
			})
		}
	}
}
