package logging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLevel(t *testing.T) {
	cases := []struct {
		name    string
		conf    int
		verbose int
		want    hclog.Level
	}{
		{"info", 3, 0, hclog.Info},
		{"one -v is debug", 3, 1, hclog.Debug},
		{"three -v is trace", 3, 3, hclog.Trace},
		{"conf debug", 5, 0, hclog.Debug},
		{"conf error", 2, 0, hclog.Error},
		{"quiet", 0, 0, hclog.Error},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Level(c.conf, c.verbose); got != c.want {
				t.Fatalf("Level(%d,%d) = %v, want %v", c.conf, c.verbose, got, c.want)
			}
		})
	}
}

func TestNew_File(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "n1.log")
	l, c, err := New("slurmd", Options{File: p, Level: 3})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("started", "node", "n1")
	c.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "started") || !strings.Contains(string(b), "node=n1") {
		t.Fatalf("log file lacks the line: %q", b)
	}
}
