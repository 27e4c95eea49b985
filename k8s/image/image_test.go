package image

import (
	"archive/tar"
	"io"
	"os"
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
