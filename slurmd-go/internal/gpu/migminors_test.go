package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMIGMinors_Lookup(t *testing.T) {
	in := "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu1/gi2/access 30\ngpu1/gi2/ci1/access 31\n"
	m, err := ParseMIGMinors(strings.NewReader(in), "mig-minors")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name           string
		gpu, gi, ci    int
		wantGI, wantCI uint32
		wantErr        bool
	}{
		{"gpu0", 0, 1, 0, 12, 13, false},
		{"gpu1", 1, 2, 1, 30, 31, false},
		{"no such ci", 1, 2, 0, 0, 0, true},
		{"no such gpu", 2, 1, 0, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, ci, err := m.Lookup(c.gpu, c.gi, c.ci)
			if (err != nil) != c.wantErr || g != c.wantGI || ci != c.wantCI {
				t.Fatalf("Lookup = %d, %d, %v; want %d, %d, err %v", g, ci, err, c.wantGI, c.wantCI, c.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMIGMinors) {
				t.Fatalf("error %v is not ErrMIGMinors", err)
			}
		})
	}
}

func TestParseMIGMinors_BadInput(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"three fields", "config 1\ngpu0/gi1/access 3 4\n", "f:2:"},
		{"bad minor", "gpu0/gi1/access x\n", "f:1: bad minor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMIGMinors(strings.NewReader(c.in), "f")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want it to name %q", err, c.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "absent")
	if _, err := ReadMIGMinors(p); !errors.Is(err, ErrMIGMinors) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
