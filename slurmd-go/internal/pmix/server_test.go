package pmix

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStart_CleansUp: a step whose helper cannot start fails with the
// cause and leaves neither directory nor socket behind.
func TestStart_CleansUp(t *testing.T) {
	base := t.TempDir()
	spool, tmp := filepath.Join(base, "spool"), filepath.Join(base, "tmp")
	for _, d := range []string{spool, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j := testJob()
	j.UID, j.GID = uint32(os.Getuid()), uint32(os.Getgid())
	j.LibTmpDir, j.CliTmpDir = Dirs(spool, tmp, j.UID, j.JobID, j.StepID)
	j.CliTmpDirBase = tmp
	missing := filepath.Join(base, "no-such-helper")
	_, err := Start(context.Background(), Config{Job: j, HelperPath: missing, SpoolDir: spool})
	if err == nil || !strings.Contains(err.Error(), "start helper "+missing) {
		t.Fatalf("error %v, want the helper's path", err)
	}
	for _, d := range []string{spool, tmp} {
		ents, _ := os.ReadDir(d)
		if len(ents) != 0 {
			t.Errorf("%s left: %v", d, ents)
		}
	}
	// a client tmpdir base that does not exist is the step's error, as pmixp_mkdir's
	j.CliTmpDirBase = filepath.Join(base, "gone")
	_, j.CliTmpDir = Dirs(spool, j.CliTmpDirBase, j.UID, j.JobID, j.StepID)
	_, err = Start(context.Background(), Config{Job: j, HelperPath: missing, SpoolDir: spool})
	if err == nil || !strings.Contains(err.Error(), "cannot create client cli tmpdir") {
		t.Fatalf("error %v, want the client tmpdir", err)
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 0 {
		t.Errorf("spool left: %v", ents)
	}
}
