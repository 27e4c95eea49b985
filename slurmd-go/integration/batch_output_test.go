//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// noArrayTask is what %a gives for a job that is not an array task: the launch
// message's array_task_id NO_VAL (0xfffffffe), printed as a number.
const noArrayTask = "4294967294"

// outCase is one job and the files (relative path -> content) it must leave in its
// own working directory.
type outCase struct {
	name  string
	user  string
	setup map[string]string // files created before submission
	dirs  []string          // sub-directories created before submission (owned by user)
	args  []string
	// script lines after #!/bin/bash
	script string
	// want gives the expected files from the job id (for arrays: the array job id;
	// every array task used here has a fixed name) and the host name.
	want func(id, host string) map[string]string
}

func outCases() []outCase {
	return []outCase{
		{
			name: "patterns", user: "root",
			args: []string{"-J", "myname",
				"-o", "o-%j-%J-%x-%N-%A-%a-%u-%n-%s-%%-%t.txt",
				"-e", "e-%5j-%10J-%3a-%2n.txt"},
			script: "echo out\necho err >&2",
			want: func(id, host string) map[string]string {
				n := atoi(id)
				return map[string]string{
					fmt.Sprintf("o-%s-%s-myname-%s-%s-%s-root-0-batch-%%-0.txt", id, id, host, id, noArrayTask): "out\n",
					fmt.Sprintf("e-%05d-%010d-%s-00.txt", n, n, noArrayTask):                                    "err\n",
				}
			},
		},
		{
			// Widths are capped at 10; a '-' is no width (left as is), %0j is %j; an
			// unknown letter stays literal; the job name keeps its space.
			name: "widths", user: "root",
			args:   []string{"-J", "n m", "-o", "w-%-3j-%0j-%12j-%10a-%x-%q.txt"},
			script: "echo w",
			want: func(id, host string) map[string]string {
				return map[string]string{
					fmt.Sprintf("w-%%-3j-%s-%010d-%s-n m-%%q.txt", id, atoi(id), noArrayTask): "w\n",
				}
			},
		},
		{
			// A backslash anywhere disables every expansion and is removed.
			name: "backslash", user: "root",
			args:   []string{"-o", `bs\-%j-%u.txt`},
			script: "echo b",
			want: func(id, host string) map[string]string {
				return map[string]string{"bs-%j-%u.txt": "b\n"}
			},
		},
		{
			// Relative names are relative to the job's working directory.
			name: "relative", user: "root",
			dirs:   []string{"sub"},
			args:   []string{"-o", "sub/r-%j.txt", "-e", "./sub/../e-%j.txt"},
			script: "echo r\necho e >&2",
			want: func(id, host string) map[string]string {
				return map[string]string{"sub/r-" + id + ".txt": "r\n", "e-" + id + ".txt": "e\n"}
			},
		},
		{
			name: "chdir", user: "root",
			dirs:   []string{"wd"},
			args:   []string{"--chdir=wd", "-o", "c-%j.txt"},
			script: "echo \"cwd=${PWD##*/}\"",
			want: func(id, host string) map[string]string {
				return map[string]string{"wd/c-" + id + ".txt": "cwd=wd\n"}
			},
		},
		{
			name: "append", user: "root",
			setup:  map[string]string{"app.txt": "pre\n"},
			args:   []string{"--open-mode=append", "-o", "app.txt"},
			script: "echo appended",
			want: func(id, host string) map[string]string {
				return map[string]string{"app.txt": "pre\nappended\n"}
			},
		},
		{
			name: "truncate", user: "root",
			setup:  map[string]string{"trunc.txt": "pre-existing content\n"},
			args:   []string{"--open-mode=truncate", "-o", "trunc.txt"},
			script: "echo truncated",
			want: func(id, host string) map[string]string {
				return map[string]string{"trunc.txt": "truncated\n"}
			},
		},
		{
			// No --open-mode: JobFileAppend=0 (default) truncates.
			name: "default-mode", user: "root",
			setup:  map[string]string{"def.txt": "pre-existing content\n"},
			args:   []string{"-o", "def.txt"},
			script: "echo default",
			want: func(id, host string) map[string]string {
				return map[string]string{"def.txt": "default\n"}
			},
		},
		{
			name: "default-name", user: "root",
			script: "echo default name\necho to stderr >&2",
			want: func(id, host string) map[string]string {
				return map[string]string{"slurm-" + id + ".out": "default name\nto stderr\n"}
			},
		},
		{
			name: "array", user: "root",
			args:   []string{"-a", "1-3", "-o", "out-%A_%a.txt"},
			script: `echo "a-$SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID count $SLURM_ARRAY_TASK_COUNT min $SLURM_ARRAY_TASK_MIN max $SLURM_ARRAY_TASK_MAX"`,
			want: func(id, host string) map[string]string {
				m := map[string]string{}
				for i := 1; i <= 3; i++ {
					m[fmt.Sprintf("out-%s_%d.txt", id, i)] = fmt.Sprintf("a-%d of %s count 3 min 1 max 3\n", i, id)
				}
				return m
			},
		},
		{
			name: "array-default", user: "root",
			args:   []string{"-a", "2,4"},
			script: `echo "d-$SLURM_ARRAY_TASK_ID"`,
			want: func(id, host string) map[string]string {
				return map[string]string{
					"slurm-" + id + "_2.out": "d-2\n",
					"slurm-" + id + "_4.out": "d-4\n",
				}
			},
		},
		{
			// A one-task array: its task keeps the array's job id, so %j = %A.
			name: "array-pad", user: "root",
			args:   []string{"-a", "7", "-o", "p-%5A-%03a-%j.txt"},
			script: "echo p",
			want: func(id, host string) map[string]string {
				return map[string]string{fmt.Sprintf("p-%05d-007-%s.txt", atoi(id), id): "p\n"}
			},
		},
		{
			// stdin from a file, with a pattern.
			name: "stdin", user: "root",
			setup:  map[string]string{"in-root.txt": "line1\nline2\n"},
			args:   []string{"-i", "in-%u.txt", "-o", "in.out"},
			script: `cat; echo "rc=$?"`,
			want: func(id, host string) map[string]string {
				return map[string]string{"in-root.txt": "line1\nline2\n", "in.out": "line1\nline2\nrc=0\n"}
			},
		},
		{
			// Default stdin is /dev/null.
			name: "stdin-default", user: "root",
			args:   []string{"-o", "noin.out"},
			script: `cat; echo "rc=$?"`,
			want: func(id, host string) map[string]string {
				return map[string]string{"noin.out": "rc=0\n"}
			},
		},
		{
			// An ordinary user's files are created as that user.
			name: "user", user: cluster.TestUser,
			args:   []string{"-o", "u-%u-%j.txt", "-e", "u-%j.err"},
			script: "echo uo\necho ue >&2",
			want: func(id, host string) map[string]string {
				return map[string]string{"u-" + cluster.TestUser + "-" + id + ".txt": "uo\n", "u-" + id + ".err": "ue\n"}
			},
		},
	}
}

// outputHost is what %N expands to in j's output file names (patternHost): its batch
// host, for an array the first task's.
func outputHost(t *testing.T, j jobOf) string {
	t.Helper()
	f := factsOf(t, j.c)
	if !f.patternNIsNodeName {
		return patternHost(t, f, "")
	}
	recs, err := j.c.ShowJobsErr(t, j.id)
	if err != nil || len(recs) == 0 {
		t.Fatalf("scontrol show job %s: %d records, %v", j.id, len(recs), err)
	}
	return patternHost(t, f, recs[0]["BatchHost"])
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("not a number: %q", s))
	}
	return n
}

// testOutputFiles: stdout/stderr/stdin file names with every pattern, widths, the
// backslash rule, relative paths, open modes, default names and array names land
// where the stock daemon puts them, with the right content and owner.
func testOutputFiles(t *testing.T, p pair) {
	type run struct {
		tc       outCase
		ref, sut jobOf
	}
	var runs []run
	for _, tc := range outCases() {
		tc := tc
		for _, c := range p.both() {
			d := c.WorkDir(t, tc.user, "out", tc.name)
			for _, sub := range tc.dirs {
				c.WorkDir(t, tc.user, "out", tc.name, sub)
			}
			uid, gid, err := cluster.LookupUser(tc.user)
			if err != nil {
				t.Fatal(err)
			}
			for f, content := range tc.setup {
				path := filepath.Join(d, f)
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(path, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
		}
		ref, sut := submitBoth(t, p, tc.user, "#!/bin/bash\n"+tc.script+"\n", func(c *cluster.Cluster) []string {
			return append([]string{basicNodes(c)}, tc.args...)
		}, "out", tc.name)
		runs = append(runs, run{tc: tc, ref: ref, sut: sut})
	}
	for _, r := range runs {
		what := "out/" + r.tc.name
		for _, j := range []jobOf{r.ref, r.sut} {
			waitJobDone(t, j)
		}
		uid, _, err := cluster.LookupUser(r.tc.user)
		if err != nil {
			t.Fatal(err)
		}
		got := map[*cluster.Cluster][]string{}
		for _, j := range []jobOf{r.ref, r.sut} {
			lbl := what + " " + p.label(j.c)
			want := r.tc.want(j.id, outputHost(t, j))
			files := listFiles(t, j.dir)
			got[j.c] = files
			if !slices.Equal(files, sortedKeys(want)) {
				t.Errorf("%s: files %q, want %q", lbl, files, sortedKeys(want))
			}
			for f, content := range want {
				path := filepath.Join(j.dir, f)
				s, ok := readJobFile(t, path)
				if !ok {
					continue // reported above
				}
				if s != content {
					t.Errorf("%s: %s = %q, want %q", lbl, f, s, content)
				}
				if _, pre := r.tc.setup[f]; pre {
					continue
				}
				if st, err := os.Stat(path); err == nil {
					if owner := st.Sys().(*syscall.Stat_t).Uid; int(owner) != uid {
						t.Errorf("%s: %s is owned by uid %d, want %d (%s)", lbl, f, owner, uid, r.tc.user)
					}
				}
			}
		}
		// The same names on both clusters, up to the job ids and %N (the host name,
		// the same on both; in 26.05 the batch host, which may differ).
		nref := normalizer(p.ref, map[string]string{r.ref.id: "<JOB>", outputHost(t, r.ref): "<HOST>"})
		nsut := normalizer(p.sut, map[string]string{r.sut.id: "<JOB>", outputHost(t, r.sut): "<HOST>"})
		var a, b []string
		for _, f := range got[p.ref] {
			a = append(a, nref(f))
		}
		for _, f := range got[p.sut] {
			b = append(b, nsut(f))
		}
		if !slices.Equal(a, b) {
			t.Errorf("%s: files (normalized) %q on the reference, %q under test", what, a, b)
		}
	}
}

// waitJobDone waits until a job, or every task of an array job, has completed.
func waitJobDone(t *testing.T, j jobOf) {
	t.Helper()
	j.c.WaitFor(t, "job "+j.id+" (all tasks) COMPLETED", shortJobTimeout, func() (bool, string) {
		recs, err := j.c.ShowJobsErr(t, j.id)
		if err != nil {
			return false, err.Error()
		}
		var st []string
		done := len(recs) > 0
		for _, r := range recs {
			st = append(st, r["JobId"]+"="+r["JobState"])
			if r["JobState"] != "COMPLETED" {
				done = false
			}
			if slices.Contains(cluster.JobTerminalStates, r["JobState"]) && r["JobState"] != "COMPLETED" {
				t.Fatalf("job %s: task %s is %s (Reason=%s ExitCode=%s), want COMPLETED", j.id, r["JobId"], r["JobState"], r["Reason"], r["ExitCode"])
			}
		}
		return done, fmt.Sprint(st)
	})
}
