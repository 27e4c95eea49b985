package jobmgr

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestLibdirFixup: a step's --send-libs directories go first in the tasks'
// LD_LIBRARY_PATH, only the first in 22.05, all of them from 24.11.
func TestLibdirFixup(t *testing.T) {
	m := &Manager{}
	m.SetLibDirs(func(uid, job, step uint32) []string {
		if uid == 1000 && job == 5 && step == 2 {
			return []string{"/w/a_libs", "/w/b_libs"}
		}
		return nil
	})
	for _, tc := range []struct {
		name    string
		version uint16
		step    uint32
		env     []string
		want    []string
	}{
		{"22.05, no path yet", slurmproto.Version2205, 2, []string{"A=1"}, []string{"A=1", "LD_LIBRARY_PATH=/w/a_libs"}},
		{"24.11, before the user's path", slurmproto.Version2411, 2, []string{"LD_LIBRARY_PATH=/opt/lib", "B=2"}, []string{"LD_LIBRARY_PATH=/w/a_libs:/w/b_libs:/opt/lib", "B=2"}},
		{"another step", slurmproto.Version2411, 3, []string{"A=1"}, []string{"A=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := &slurmproto.LaunchTasks{UID: 1000, StepID: slurmproto.StepID{JobID: 5, StepID: tc.step}, Env: tc.env}
			m.libdirFixup(tc.version, msg)
			if !slices.Equal(msg.Env, tc.want) {
				t.Fatalf("env %q, want %q", msg.Env, tc.want)
			}
		})
	}
}

// TestUnsupportedStepFeature: a launch asking for X11 forwarding, or for an OCI
// container where oci.conf turns containers on, is refused with stock's code;
// --container without oci.conf runs as on stock, which ignores it then.
func TestUnsupportedStepFeature(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	log := hclog.NewNullLogger()
	launch := func(x11 uint16, container string) *slurmproto.LaunchTasks {
		m := &slurmproto.LaunchTasks{Container: container}
		m.X11 = x11
		return m
	}
	if rc := unsupportedStepFeature(log, conf, launch(0, "")); rc != 0 {
		t.Fatalf("plain launch: rc %s", slurmproto.RCName(rc))
	}
	if rc := unsupportedStepFeature(log, conf, launch(1, "")); rc != slurmproto.ESlurmX11NotAvail {
		t.Fatalf("--x11: rc %s, want ESLURM_X11_NOT_AVAIL", slurmproto.RCName(rc))
	}
	if rc := unsupportedStepFeature(log, conf, launch(0, "/bundle")); rc != 0 {
		t.Fatalf("--container without oci.conf: rc %s, want 0 as stock", slurmproto.RCName(rc))
	}
	dbg := launch(0, "")
	dbg.Flags = slurmproto.LaunchParallelDebug
	if rc := unsupportedStepFeature(log, conf, dbg); rc != 0 {
		t.Fatalf("--debugger-test: rc %s, want 0 (the step manager stops the tasks at exec)", slurmproto.RCName(rc))
	}
	if err := os.WriteFile(filepath.Join(dir, ociConfName), []byte("RunTimeRun=\"runc run %b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := unsupportedStepFeature(log, conf, launch(0, "/bundle")); rc != slurmproto.ESlurmContainerNotConfigured {
		t.Fatalf("--container with oci.conf: rc %s, want ESLURM_CONTAINER_NOT_CONFIGURED", slurmproto.RCName(rc))
	}
}
