package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestCtldHostsFrom(t *testing.T) {
	h, err := ctldHostsFrom("ctl1, ctl2:7000")
	if err != nil || strings.Join(h, " ") != "ctl1:6817 ctl2:7000" {
		t.Fatalf("%v %v", h, err)
	}
	if _, err := ctldHostsFrom(" , "); err == nil {
		t.Fatal("an empty server list accepted")
	}
}

func TestWriteConfCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf-cache")
	files := []slurmproto.ConfigFile{
		{Exists: true, Name: "slurm.conf", Content: "ClusterName=c\n"},
		{Exists: true, Name: "empty.conf", Content: slurmproto.EmptyString},
		{Exists: true, Execute: true, Name: "prolog.sh", Content: "#!/bin/sh\n"},
		{Exists: false, Name: "gres.conf"},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "gres.conf"), []byte("old"), 0o644)
	if err := WriteConfCache(dir, files); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "slurm.conf")); string(b) != "ClusterName=c\n" {
		t.Fatalf("slurm.conf %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "empty.conf")); err != nil || len(b) != 0 {
		t.Fatalf("empty file %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "prolog.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("script %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gres.conf")); !os.IsNotExist(err) {
		t.Fatalf("a file slurmctld no longer has is still cached: %v", err)
	}
	for _, bad := range []string{"../slurm.conf", "a/b", "..", ""} {
		if err := WriteConfCache(dir, []slurmproto.ConfigFile{{Exists: true, Name: bad}}); err == nil {
			t.Fatalf("file name %q accepted", bad)
		}
	}
}
