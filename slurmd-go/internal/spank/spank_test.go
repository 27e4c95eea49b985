package spank

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestHasPlugins(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, body string
		want       bool
	}{
		{"empty", "", false},
		{"comments", "# nothing\n   \n\t# optional x.so\n", false},
		{"required", "# x\nrequired /usr/lib/x.so arg=1\n", true},
		{"include", "include /etc/slurm/plugstack.conf.d/*\n", true},
		{"trailing comment", "optional pbs.so # the PBS env\n", true},
	} {
		got, err := HasPlugins(write(c.name, c.body))
		if err != nil || got != c.want {
			t.Errorf("%s: HasPlugins = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if got, err := HasPlugins(filepath.Join(dir, "missing")); got || err != nil {
		t.Errorf("missing file: %v, %v; want an empty stack", got, err)
	}
	if got, err := HasPlugins(""); got || err != nil {
		t.Errorf("no path: %v, %v", got, err)
	}
	if _, err := HasPlugins(dir); err == nil {
		t.Errorf("a directory: no error")
	}
}

func TestPacket(t *testing.T) {
	p := newPacket("STEP").add("mode", "tasks").add("env", "A=1=2").add("env", "B=").addU("uid", 1000)
	b, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	if want := "STEP\x00mode=tasks\x00env=A=1=2\x00env=B=\x00uid=1000\x00"; string(b) != want {
		t.Fatalf("encoded %q, want %q", b, want)
	}
	q, err := decodePacket(b)
	if err != nil {
		t.Fatal(err)
	}
	if q.cmd != "STEP" || q.get("mode") != "tasks" || !reflect.DeepEqual(q.all("env"), []string{"A=1=2", "B="}) {
		t.Errorf("decoded %+v", q)
	}
	if n, err := q.int("uid"); err != nil || n != 1000 {
		t.Errorf("uid %d, %v", n, err)
	}
	if _, err := q.int("mode"); err == nil {
		t.Errorf("int of a non-number: no error")
	}
	if _, err := newPacket("X").add("k", "a\x00b").encode(); err == nil {
		t.Errorf("a NUL in a value encoded")
	}
	for _, bad := range [][]byte{nil, []byte("READY")} {
		if _, err := decodePacket(bad); err == nil {
			t.Errorf("decodePacket(%q): no error", bad)
		}
	}
}

func TestDeltaApply(t *testing.T) {
	env := []string{"A=1", "B=2", "C=3"}
	got := Delta{Set: []string{"B=20", "D=4"}, Unset: []string{"C", "Z"}}.Apply(env)
	if want := []string{"A=1", "B=20", "D=4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Apply = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(env, []string{"A=1", "B=2", "C=3"}) {
		t.Errorf("Apply changed its input: %v", env)
	}
}

func TestVersionNumber(t *testing.T) {
	for v, want := range map[string]uint32{"22.05.8": 0x160508, "24.11.5": 0x180b05, "26.05.5": 0x1a0505} {
		if got, err := VersionNumber(v); err != nil || got != want {
			t.Errorf("VersionNumber(%q) = %#x, %v; want %#x", v, got, err, want)
		}
	}
	for _, bad := range []string{"", "22.05", "22.x.1", "300.1.1"} {
		if _, err := VersionNumber(bad); err == nil {
			t.Errorf("VersionNumber(%q): no error", bad)
		}
	}
}
