package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPrintConfError: a broken slurm.conf is reported with stock slurmd's
// two lines, the cause located.
func TestPrintConfError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slurm.conf")
	writeFile(t, p, "ClusterName=c\nSlurmctldHost=h\nBogusKey=1\nNodeName=n1\n")
	_, err := config.Load(config.Flags{ConfFile: p, NodeName: "n1"})
	if err == nil {
		t.Fatal("Load accepted an unknown key")
	}
	var b bytes.Buffer
	printConfError(&b, err)
	want := "slurmd-go: error: " + p + ":3: _parse_next_key: Parsing error at unrecognized key: BogusKey\n" +
		"slurmd-go: fatal: Unable to process configuration file\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printConfError(&b, errors.New("config: no node"))
	if b.String() != "slurmd-go: fatal: config: no node\n" {
		t.Errorf("plain error: %q", b.String())
	}
}

// TestPrintConfWarnings: what slurmd logs and survives, from both files.
func TestPrintConfWarnings(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slurm.conf")
	writeFile(t, p, "ClusterName=c\nSlurmctldHost=h\nTmpFS=/a\nTmpFS=/b\nNodeName=n1\n")
	writeFile(t, filepath.Join(dir, "cgroup.conf"), "MemorySwappiness=300\n")
	cfg, err := config.Load(config.Flags{ConfFile: p, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printConfWarnings(&b, cfg)
	want := "slurmd-go: error: " + p + ":4: TmpFS 1 specified more than once, latest value used\n" +
		"slurmd-go: error: " + filepath.Join(dir, "cgroup.conf") + ":1: Value for MemorySwappiness is too high, rounding down to 100.\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestPrintConfWarnings_Unprovided: what slurm.conf turns on and slurmd-go does
// not do is said at start, naming the key.
func TestPrintConfWarnings_Unprovided(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slurm.conf")
	writeFile(t, p, "ClusterName=c\nSlurmctldHost=h\nPrologFlags=Contain,X11\nProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity\nSlurmctldParameters=enable_configless,enable_stepmgr\nNodeName=n1\n")
	cfg, err := config.Load(config.Flags{ConfFile: p, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printConfWarnings(&b, cfg)
	for _, want := range []string{
		"slurmd-go: warning: " + p + ":0: PrologFlags=X11: slurmd-go does not forward X11",
		"slurmd-go: warning: " + p + ":0: TaskPlugin=task/affinity: slurmd-go has no task/affinity",
		"slurmd-go: warning: " + p + ":0: SlurmctldParameters=enable_stepmgr: slurmd-go does not serve step management",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("warnings lack %q:\n%s", want, b.String())
		}
	}
	// PrologFlags=Contain is provided (the extern step): no warning for it.
	if strings.Contains(b.String(), "Contain") {
		t.Errorf("warning for the provided PrologFlags=Contain:\n%s", b.String())
	}
}
