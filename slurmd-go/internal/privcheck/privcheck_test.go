package privcheck

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

func TestMissing(t *testing.T) {
	conf := &slurmconf.Config{JobContainerType: slurmconf.DefaultJobContainerType}
	all := uint64(1)<<capChown | 1<<capDacOverride | 1<<capFowner | 1<<capKill | 1<<capSetgid | 1<<capSetuid | 1<<capSysPtrace | 1<<capSysNice
	if req, opt := Missing(all, Needs(conf)); len(req) != 0 || len(opt) != 1 || opt[0].Name != "CAP_SYS_ADMIN" {
		t.Fatalf("all but SYS_ADMIN: required %v optional %v", req, opt)
	}
	req, _ := Missing(all&^(1<<capSetuid), Needs(conf))
	if len(req) != 1 || req[0].Name != "CAP_SETUID" {
		t.Fatalf("no SETUID: %v", req)
	}
	msg := (&Error{Missing: req}).Error()
	if !strings.Contains(msg, "missing privilege: CAP_SETUID (run tasks as their users)") {
		t.Fatal(msg)
	}
	// job_container/tmpfs makes SYS_ADMIN required.
	conf.JobContainerType = "job_container/tmpfs"
	if req, _ := Missing(all, Needs(conf)); len(req) != 1 || req[0].Name != "CAP_SYS_ADMIN" || !strings.Contains(req[0].For, "job_container/tmpfs") {
		t.Fatalf("tmpfs: %v", req)
	}
}

func TestEffective(t *testing.T) {
	if _, err := Effective(); err != nil {
		t.Fatal(err)
	}
}

func TestWritable(t *testing.T) {
	d := t.TempDir()
	if n := Writable([]string{d}); len(n) != 0 {
		t.Fatalf("writable dir: %v", n)
	}
	gone := filepath.Join(d, "gone")
	n := Writable([]string{gone})
	if len(n) != 1 || !n[0].Required || !strings.Contains(n[0].String(), "delegate cgroup v2") {
		t.Fatalf("missing dir: %v", n)
	}
	var e *Error
	if !errors.As(error(&Error{Missing: n}), &e) {
		t.Fatal("not an *Error")
	}
}
