package image

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func entries(t *testing.T, files []File) []string {
	t.Helper()
	l, err := Layer(files)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, h.Name+" "+string(h.Typeflag)+" "+h.Linkname+" "+strings.TrimSpace(string(b)))
	}
}

func TestLayer_ParentsSortedAndDeterministic(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	os.WriteFile(src, []byte("ELF"), 0o755)
	files := []File{
		{Path: "/opt/tiee/bin/slurmd-go", Src: src, Mode: 0o755},
		{Path: "/bin/sh", Link: "/bin/busybox"},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0::/root:/bin/sh"), Mode: 0o644},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
	}
	got := strings.Join(entries(t, files), "\n")
	want := strings.Join([]string{
		"bin/ 5  ", "bin/sh 2 /bin/busybox ", "etc/ 5  ", "etc/passwd 0  root:x:0:0::/root:/bin/sh",
		"opt/ 5  ", "opt/tiee/ 5  ", "opt/tiee/bin/ 5  ", "opt/tiee/bin/slurmd-go 0  ELF", "tmp/ 5  ",
	}, "\n")
	if got != want {
		t.Fatalf("layer:\n%s\nwant:\n%s", got, want)
	}
	a, _ := Layer(files)
	b, _ := Layer(files)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds differ: %s %s", da, db)
	}
}

func TestLayer_RelativePathRefused(t *testing.T) {
	if _, err := Layer([]File{{Path: "etc/passwd"}}); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("err %v", err)
	}
}

// TestSlurmdGo_Binaries: the image carries the daemon, the step manager and
// the SPANK host the step manager runs from beside itself, with busybox's
// applets linked to it.
func TestSlurmdGo_Binaries(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox (scripts/install-deps.sh installs it; make image needs it): %v", err)
	}
	bin := t.TempDir()
	for _, n := range []string{"slurmd-go", "slurmstepd-go", "spank-runner"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files, cfg, err := SlurmdGo(bin, busybox)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]File{}
	for _, f := range files {
		have[f.Path] = f
	}
	for _, p := range []string{Slurmd, Stepd, SpankRunner} {
		f, ok := have[p]
		if !ok || f.Src != filepath.Join(bin, filepath.Base(p)) || f.Mode != 0o755 {
			t.Errorf("%s: %+v (present %v)", p, f, ok)
		}
	}
	if filepath.Dir(SpankRunner) != filepath.Dir(Stepd) {
		t.Errorf("spank-runner at %s, not beside the step manager %s", SpankRunner, Stepd)
	}
	if f := have["/bin/sh"]; f.Link != "/bin/busybox" {
		t.Errorf("/bin/sh: %+v", f)
	}
	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != Slurmd {
		t.Errorf("entrypoint %q", cfg.Entrypoint)
	}
}
