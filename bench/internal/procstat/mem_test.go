package procstat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const smapsSample = `00400000-00402000 r--p 00000000 fe:00 123 /usr/bin/x y
Size:                  8 kB
Rss:                   8 kB
Pss:                   4 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
00402000-00502000 r-xp 00002000 fe:00 123 /usr/bin/x y
Size:               1024 kB
Rss:                 600 kB
Pss:                 600 kB
Private_Clean:       600 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                 100 kB
Pss:                 100 kB
Private_Clean:         0 kB
Private_Dirty:       100 kB
Anonymous:           100 kB
7f0000200000-7f0000210000 r-xp 00000000 fe:00 7 /usr/lib/libc.so.6
Size:                 64 kB
Rss:                  64 kB
Pss:                   2 kB
Private_Clean:         0 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
Rss:                  12 kB
Pss:                  12 kB
Private_Clean:         0 kB
Private_Dirty:        12 kB
Anonymous:            12 kB
VmFlags: rd wr mr mw me gd ac
`

func TestParseSmaps(t *testing.T) {
	m, err := parseSmaps(strings.NewReader(smapsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := Mem{RSSKB: 784, AnonKB: 112, FileKB: 672, PSSKB: 718, PrivateKB: 712,
		Files: []FileRSS{{Path: "/usr/bin/x y", RSSKB: 608, SizeKB: 1032}, {Path: "/usr/lib/libc.so.6", RSSKB: 64, SizeKB: 64}}}
	if m.RSSKB != want.RSSKB || m.AnonKB != want.AnonKB || m.FileKB != want.FileKB || m.PSSKB != want.PSSKB || m.PrivateKB != want.PrivateKB {
		t.Fatalf("totals %+v, want %+v", m, want)
	}
	if len(m.Files) != 2 || m.Files[0] != want.Files[0] || m.Files[1] != want.Files[1] {
		t.Fatalf("files %+v, want %+v", m.Files, want.Files)
	}
}

// TestReadMem_Self: this test binary is among the mapped files, and touching 16 MiB of new
// heap shows up as anonymous memory.
func TestReadMem_Self(t *testing.T) {
	m0, err := ReadMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, err := filepath.EvalSymlinks("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range m0.Files {
		found = found || f.Path == exe
	}
	if !found || m0.FileKB <= 0 || m0.AnonKB <= 0 || m0.RSSKB != m0.AnonKB+m0.FileKB {
		t.Fatalf("implausible breakdown of this process (exe %s): %+v", exe, m0)
	}
	buf := make([]byte, 16<<20)
	for i := range buf {
		if i%4096 == 0 {
			buf[i] = 1
		}
	}
	m1, err := ReadMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if grew := m1.AnonKB - m0.AnonKB; grew < 12<<10 {
		t.Fatalf("anonymous memory grew by %d KiB after touching 16 MiB", grew)
	}
	_ = buf[len(buf)-1]
}
