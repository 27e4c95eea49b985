//go:build linux

package stepd

import (
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestStep_FileNamesDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		in, out, errp          string
		arrayTask              uint32
		wantIn, wantOut, wantE string
	}{
		{"all default", "", "", "", slurmproto.NoVal, "/dev/null", "/w/slurm-9.out", "/w/slurm-9.out"},
		{"array default", "", "", "", 3, "/dev/null", "/w/slurm-8_3.out", "/w/slurm-8_3.out"},
		{"stderr follows stdout", "in-%j", "o-%j", "", slurmproto.NoVal, "/w/in-9", "/w/o-9", "/w/o-9"},
		{"separate stderr", "", "o", "e-%x", slurmproto.NoVal, "/dev/null", "/w/o", "/w/e-jn"},
		{"empty wire string is a name", "", slurmproto.EmptyString, "", slurmproto.NoVal, "/dev/null", "/w/", "/w/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Step{
				spec:     nil,
				userName: "u",
				cwd:      "/w",
				msg: &slurmproto.BatchJobLaunch{JobID: 9, ArrayJobID: 8, ArrayTaskID: tc.arrayTask,
					StdIn: tc.in, StdOut: tc.out, StdErr: tc.errp, Environment: []string{"SLURM_JOB_NAME=jn"}},
			}
			s.spec = specStub()
			s.fileNames()
			if s.inName != tc.wantIn || s.outName != tc.wantOut || s.errName != tc.wantE {
				t.Errorf("in %q out %q err %q, want %q %q %q", s.inName, s.outName, s.errName, tc.wantIn, tc.wantOut, tc.wantE)
			}
		})
	}
}
