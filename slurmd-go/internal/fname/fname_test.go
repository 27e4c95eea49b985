package fname

import (
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestBatchFileName(t *testing.T) {
	name := "myjob"
	arr := Job{
		JobID: 1234, StepID: slurmproto.StepIDBatch, ArrayJobID: 1200, ArrayTaskID: 7,
		UserName: "alice", JobName: &name, Hostname: "vm", Cwd: "/home/alice/work",
	}
	plain := arr
	plain.ArrayJobID, plain.ArrayTaskID, plain.JobName = 0, slurmproto.NoVal, nil
	slash := arr
	slash.Cwd = "/home/alice/work/"
	const cwd = "/home/alice/work/"
	for _, tc := range []struct {
		name, format string
		job          Job
		task         int
		want         string
	}{
		{"default", "slurm-%J.out", plain, 0, cwd + "slurm-1234.out"},
		{"job id", "slurm-%j.out", plain, 0, cwd + "slurm-1234.out"},
		{"array default", "slurm-%A_%a.out", arr, 0, cwd + "slurm-1200_7.out"},
		{"every letter", "%x-%u-%N-%n-%s-%t-%%.txt", arr, 0, cwd + "myjob-alice-vm-0-batch-0-%.txt"},
		{"%A without array is the job id", "%A.out", plain, 0, cwd + "1234.out"},
		{"%a without array is NO_VAL", "%a.out", plain, 0, cwd + "4294967294.out"},
		{"%x without SLURM_JOB_NAME", "%x.out", plain, 0, cwd + "(null).out"},
		{"width", "%5j", arr, 0, cwd + "01234"},
		{"width with leading zero", "%010j", arr, 0, cwd + "0000001234"},
		{"width capped at 10", "%12j", arr, 0, cwd + "0000001234"},
		{"width on %a", "t%3a", arr, 0, cwd + "t007"},
		{"width on %A", "%6A", arr, 0, cwd + "001200"},
		{"width on %n and %t", "%2n-%4t", arr, 0, cwd + "00-0000"},
		{"no width on %s %N %u %x", "%5s-%5N-%5u-%5x", arr, 0, cwd + "batch-vm-alice-myjob"},
		{"unknown conversion kept", "a%zb", arr, 0, cwd + "a%zb"},
		{"width before unknown loses % and all but last digit", "a%12zb", arr, 0, cwd + "a2zb"},
		{"trailing percent", "x%", arr, 0, cwd + "x%"},
		{"trailing width", "x%5", arr, 0, cwd + "x5"},
		{"double percent", "%%j", arr, 0, cwd + "%j"},
		{"triple percent", "%%%j", arr, 0, cwd + "%1234"},
		{"width then percent", "%5%j", arr, 0, cwd + "51234"},
		{"absolute", "/tmp/o-%j", arr, 0, "/tmp/o-1234"},
		{"cwd with trailing slash", "o", slash, 0, "/home/alice/work/o"},
		{"backslash disables expansion", "/tmp/\\%j-%u", arr, 0, "/tmp/%j-%u"},
		{"double backslash is one", "/tmp/a\\\\b%j", arr, 0, "/tmp/a\\b%j"},
		{"relative escaped is glued to cwd", "out\\%j", arr, 0, "/home/alice/workout%j"},
		{"single task elsewhere", "3", arr, 0, "/dev/null"},
		{"single task here", "0", arr, 0, cwd + "0"},
		{"single task with blanks", " 2", arr, 2, cwd + " 2"},
		{"empty is task 0", "", arr, 0, cwd},
		{"negative is no task", "-1", arr, 0, cwd + "-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Batch(tc.format, tc.job, tc.task); got != tc.want {
				t.Errorf("Batch(%q) = %q, want %q", tc.format, got, tc.want)
			}
		})
	}
}
