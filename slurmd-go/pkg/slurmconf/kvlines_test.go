package slurmconf

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadLines: comments, continuations and blank lines go; Include is
// followed (22.05 relative to the including file, 24.11 to the top file;
// 24.11 refuses globs); errors carry the file, line and the fatal line.
func TestReadLines(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "top.conf"), "# c\nName=gpu \\\n  File=/dev/nvidia0 # x\n\nInclude sub/a.conf\nName=shard Count=2\n")
	write(filepath.Join(sub, "a.conf"), "Include b.conf\n")
	write(filepath.Join(sub, "b.conf"), "Name=mps Count=100\n") // 22.05: beside a.conf
	write(filepath.Join(dir, "b.conf"), "Name=nic Count=1\n")   // 24.11: beside top.conf
	for _, tc := range []struct {
		v    uint16
		want string
	}{
		{V2205, "top.conf:2:Name=gpu   File=/dev/nvidia0 |sub/b.conf:1:Name=mps Count=100|top.conf:6:Name=shard Count=2"},
		{V2411, "top.conf:2:Name=gpu   File=/dev/nvidia0 |b.conf:1:Name=nic Count=1|top.conf:6:Name=shard Count=2"},
	} {
		lines, err := ReadLines(filepath.Join(dir, "top.conf"), "fatal!", Options{Version: tc.v})
		if err != nil {
			t.Fatalf("%s: %v", Release(tc.v), err)
		}
		var got []string
		for _, l := range lines {
			rel, _ := filepath.Rel(dir, l.File)
			got = append(got, rel+":"+itoa(l.Line)+":"+strings.TrimRight(l.Text, "\n"))
		}
		if g := strings.Join(got, "|"); g != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", Release(tc.v), g, tc.want)
		}
	}
	write(filepath.Join(dir, "glob.conf"), "Include sub/*.conf\n")
	_, err := ReadLines(filepath.Join(dir, "glob.conf"), "fatal!", Options{Version: V2411})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 1 || pe.Fatal != "fatal!" || !strings.Contains(pe.Msg, "glob") {
		t.Errorf("24.11 glob: %v", err)
	}
	write(filepath.Join(dir, "missing.conf"), "Name=gpu\nInclude nope.conf\n")
	if _, err := ReadLines(filepath.Join(dir, "missing.conf"), "fatal!"); !errors.As(err, &pe) || pe.Line != 2 || !errors.Is(err, ErrInclude) {
		t.Errorf("missing include: %v", err)
	}
	if _, err := ReadLines(filepath.Join(dir, "none.conf"), "fatal!"); !errors.Is(err, ErrInclude) {
		t.Errorf("missing file: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestNextKeyValue(t *testing.T) {
	k, v, rest, ok := NextKeyValue(`  Type="a b" File=x`)
	if !ok || k != "Type" || v != "a b" || rest != " File=x" {
		t.Errorf("%q %q %q %v", k, v, rest, ok)
	}
	if _, _, _, ok := NextKeyValue("junk"); ok {
		t.Error("junk matched")
	}
	if _, _, _, ok := NextKeyValue("Count+=1"); ok {
		t.Error("an operator form matched")
	}
}
