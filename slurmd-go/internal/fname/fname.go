// Package fname expands Slurm's stdio file name patterns (src/slurmd/common/fname.c):
// the step manager opens the files, and the daemon writes Prolog failures
// into the same stderr file.
package fname

import (
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/cparse"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fnameMaxWidth is fname.c's MAX_WIDTH: the largest zero-pad width.
const fnameMaxWidth = 10

// Job holds what a stdio file name pattern expands from.
type Job struct {
	JobID       uint32
	StepID      uint32 // slurmproto.StepIDBatch for the batch script
	ArrayJobID  uint32
	ArrayTaskID uint32 // slurmproto.NoVal unless an array job
	NodeID      uint32 // %n (0 for a batch script)
	UserName    string // %u
	// JobName is SLURM_JOB_NAME from the job's environment (%x); nil
	// (absent) expands to "(null)", as C's printf of a NULL string.
	JobName  *string
	Hostname string // %N: the node's host name, not its NodeName
	Cwd      string // relative names are prefixed with it
}

// Batch expands a batch job's stdin/stdout/stderr pattern for task
// taskID, exactly as Slurm 22.05's fname_create does for a batch step
// (src/slurmd/common/fname.c), quirks included:
//
//   - a pattern that is just a number names the single task that gets the
//     file; every other task gets /dev/null;
//   - any backslash disables all expansion (escaping backslashes are
//     removed), and a relative name is then glued to the working directory
//     without a '/';
//   - "%%" is '%'; "%<digits><c>" pads to the width (at most 10); unknown
//     conversions are kept, but a width before one loses its '%' and all
//     but its last digit;
//   - %a %A %j %J %n %N %s %t %u %x as documented, %s is "batch".
func Batch(format string, j Job, taskID int) string {
	if id := singleTaskIO(format); id >= 0 && taskID != id {
		return "/dev/null"
	}
	esc, hasEsc := removePathSlashes(format)
	var name strings.Builder
	if len(format) == 0 || format[0] != '/' {
		name.WriteString(j.Cwd)
		if hasEsc {
			name.WriteString(esc)
			return name.String()
		}
		if j.Cwd == "" || !strings.HasSuffix(j.Cwd, "/") {
			name.WriteByte('/')
		}
	}
	if hasEsc {
		return esc
	}
	expandBatch(&name, format, j, taskID)
	return name.String()
}

// expandBatch is _create_batch_fname: p scans, q marks the start of the
// literal text not yet copied.
func expandBatch(name *strings.Builder, path string, j Job, taskID int) {
	at := func(i int) byte {
		if i < len(path) {
			return path[i]
		}
		return 0
	}
	p, q := 0, 0
	for p < len(path) {
		if path[p] != '%' {
			p++
			continue
		}
		if at(p+1) == '%' {
			p++
			name.WriteString(path[q:p])
			p++
			q = p
			continue
		}
		p++
		wid := 0
		if cparse.IsDigit(at(p)) {
			name.WriteString(path[q : p-1])
			start := p
			for cparse.IsDigit(at(p)) {
				p++
			}
			wid = parseWidth(path[start:p])
			q = p - 1
			if p >= len(path) {
				break
			}
		}
		batchPathCheck(name, path, &p, &q, wid, j, taskID)
	}
	if q != p {
		name.WriteString(path[q:p])
	}
}

// parseWidth is strtoul clamped to fnameMaxWidth.
func parseWidth(digits string) int {
	v := 0
	for _, c := range digits {
		v = v*10 + int(c-'0')
		if v > fnameMaxWidth {
			return fnameMaxWidth
		}
	}
	return v
}

func batchPathCheck(name *strings.Builder, path string, p, q *int, wid int, j Job, taskID int) {
	if *p >= len(path) {
		return
	}
	lit := func() { name.WriteString(path[*q : *p-1]) }
	num := func(v uint32) { fmt.Fprintf(name, "%0*d", wid, v) }
	switch path[*p] {
	case 'a':
		lit()
		num(j.ArrayTaskID)
	case 'A':
		lit()
		if j.ArrayTaskID == slurmproto.NoVal {
			num(j.JobID)
		} else {
			num(j.ArrayJobID)
		}
	case 'J', 'j':
		lit()
		num(j.JobID)
		if path[*p] == 'J' && j.StepID != slurmproto.StepIDBatch {
			fmt.Fprintf(name, ".%d", j.StepID)
		}
	case 'n':
		lit()
		num(j.NodeID)
	case 'N':
		lit()
		name.WriteString(j.Hostname)
	case 's':
		lit()
		if j.StepID == slurmproto.StepIDBatch {
			name.WriteString("batch")
		} else {
			num(j.StepID)
		}
	case 't':
		lit()
		num(uint32(taskID))
	case 'u':
		lit()
		name.WriteString(j.UserName)
	case 'x':
		lit()
		if j.JobName == nil {
			name.WriteString("(null)")
		} else {
			name.WriteString(*j.JobName)
		}
	default:
		return
	}
	*p++
	*q = *p
}

// singleTaskIO is fname_single_task_io: the task id if the whole pattern
// is one number as strtoul reads it (the empty pattern counts as 0), else
// -1. The value goes through C's unsigned long to int conversion.
func singleTaskIO(s string) int {
	v, n := cparse.Strtoul(s)
	if n == 0 {
		if len(s) == 0 {
			return 0
		}
		return -1
	}
	if n != len(s) {
		return -1
	}
	return int(int32(uint32(v)))
}

// SingleTask reports whether a pattern names one task ("3"): then only
// that task's stream goes to srun and the others get /dev/null.
func SingleTask(pattern string) (int, bool) {
	if pattern == "" {
		return 0, false
	}
	id := singleTaskIO(pattern)
	return id, id >= 0
}

// removePathSlashes is remove_path_slashes: it drops escaping backslashes
// ("\\" becomes "\") and reports whether there was any.
func removePathSlashes(p string) (string, bool) {
	if strings.IndexByte(p, '\\') < 0 {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			if i+1 < len(p) && p[i+1] == '\\' {
				b.WriteByte('\\')
				i++
			}
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String(), true
}

// JobFor builds the pattern inputs of a batch job. %x comes from
// SLURM_JOB_NAME in the job's environment; cwd is the directory relative
// names are under (the job's working directory).
func JobFor(m *slurmproto.BatchJobLaunch, userName, hostname, cwd string) Job {
	j := Job{
		JobID: m.JobID, StepID: slurmproto.StepIDBatch,
		ArrayJobID: m.ArrayJobID, ArrayTaskID: m.ArrayTaskID,
		UserName: userName, Hostname: hostname, Cwd: cwd,
	}
	for _, kv := range m.Environment {
		if v, ok := strings.CutPrefix(kv, "SLURM_JOB_NAME="); ok {
			j.JobName = &v
			break
		}
	}
	return j
}

// BatchStdio expands a batch job's stdin, stdout and stderr names
// (slurmstepd_job.c batch_stepd_step_rec_create): stderr defaults to the
// stdout pattern, stdout to slurm-%J.out (slurm-%A_%a.out for arrays),
// stdin to /dev/null.
func BatchStdio(m *slurmproto.BatchJobLaunch, j Job) (in, out, errName string) {
	outPat, errPat := m.StdOut, m.StdErr
	if errPat == "" {
		errPat = outPat
	}
	def := func(p string) string {
		if p != "" {
			return slurmproto.CString(p)
		}
		if m.ArrayTaskID == slurmproto.NoVal {
			return "slurm-%J.out"
		}
		return "slurm-%A_%a.out"
	}
	in = "/dev/null"
	if m.StdIn != "" {
		in = Batch(slurmproto.CString(m.StdIn), j, 0)
	}
	return in, Batch(def(outPat), j, 0), Batch(def(errPat), j, 0)
}
