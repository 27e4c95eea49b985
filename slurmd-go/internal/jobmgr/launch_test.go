package jobmgr

import (
	"slices"
	"testing"

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
