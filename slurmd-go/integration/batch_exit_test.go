//go:build integration

package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// exitOutcome is what slurmctld and the Epilog see of a batch job's end. The stock
// values: slurmstepd sends the raw wait status of the batch shell
// (REQUEST_COMPLETE_BATCH_SCRIPT job_rc), slurmctld shows ExitCode
// "WEXITSTATUS:WTERMSIG" and the Epilog gets the raw status in SLURM_JOB_EXIT_CODE
// and "exit:signal" in SLURM_JOB_EXIT_CODE2.
type exitOutcome struct {
	// scontrol show job
	state, reason, exitCode string
	// Epilog environment
	epilogCode, epilogCode2 string
}

// exitCase is one batch script and how it ends.
type exitCase struct {
	name   string
	script string   // the lines after #!/bin/bash
	args   []string // extra sbatch arguments
	file   string   // a plain file created in the job's directory before the submission
	exitOutcome
	// raisedReason replaces reason where the release names the signal
	// (stockFacts.reasonRaisedSignal).
	raisedReason string
	// dirCreated, if set, is the outcome where the step manager creates a missing
	// output directory (stockFacts.stepdCreatesOutputDirs).
	dirCreated *exitOutcome
}

// outcome is how tc ends on a release with facts f.
func (tc exitCase) outcome(f stockFacts) exitOutcome {
	o := tc.exitOutcome
	if tc.raisedReason != "" && f.reasonRaisedSignal {
		o.reason = tc.raisedReason
	}
	if tc.dirCreated != nil && f.stepdCreatesOutputDirs {
		o = *tc.dirCreated
	}
	return o
}

// stdoutUnopenable is how a job whose stdout cannot be opened ends: slurmstepd
// reports ESLURMD_IO_ERROR (4021 = 0xfb5) as the job's status, which slurmctld reads
// as signal 0xfb5&0x7f = 53; the node is not drained (batch jobs report slurm_rc 0
// for I/O setup failures).
var stdoutUnopenable = exitOutcome{state: "FAILED", reason: "JobLaunchFailure", exitCode: "0:53", epilogCode: "4021", epilogCode2: "0:53"}

var exitCases = []exitCase{
	{
		name: "exit0", script: "echo hello\nexit 0",
		exitOutcome: exitOutcome{state: "COMPLETED", reason: "None", exitCode: "0:0", epilogCode: "0", epilogCode2: "0:0"},
	},
	{
		// A background child outlives the shell: the step is not over (and the Epilog
		// does not start) until it is killed.
		name:        "exit3",
		script:      `bash -c "exec -a linger-$SLURM_CLUSTER_NAME-$SLURM_JOB_ID sleep 1000" &` + "\nexit 3",
		exitOutcome: exitOutcome{state: "FAILED", reason: "NonZeroExitCode", exitCode: "3:0", epilogCode: "768", epilogCode2: "3:0"},
	},
	{
		name: "sigkill", script: "kill -9 $$",
		exitOutcome:  exitOutcome{state: "FAILED", reason: "JobLaunchFailure", exitCode: "0:9", epilogCode: "9", epilogCode2: "0:9"},
		raisedReason: "RaisedSignal:9(Killed)",
	},
	{
		name: "sigusr1", script: "kill -USR1 $$",
		exitOutcome:  exitOutcome{state: "FAILED", reason: "JobLaunchFailure", exitCode: "0:10", epilogCode: "10", epilogCode2: "0:10"},
		raisedReason: "RaisedSignal:10(User_defined_signal_1)",
	},
	{
		// A plain file where the output's directory should be: no release can open it.
		name: "stdout-unopenable", script: "echo never", args: []string{"-o", "a-file/out.txt"}, file: "a-file",
		exitOutcome:  stdoutUnopenable,
		raisedReason: "RaisedSignal:53(Real-time_signal_19)",
	},
	{
		// A missing directory: 22.05 cannot open the file; 24.11 on create the
		// directory, and the job runs.
		name: "stdout-dir-missing", script: "echo ran", args: []string{"-o", "no-such-dir/out.txt"},
		exitOutcome:  stdoutUnopenable,
		raisedReason: "RaisedSignal:53(Real-time_signal_19)",
		dirCreated:   &exitOutcome{state: "COMPLETED", reason: "None", exitCode: "0:0", epilogCode: "0", epilogCode2: "0:0"},
	},
}

// testExitCodes: for root and the ordinary user, each exitCase ends with the same
// JobState, Reason and ExitCode as on the stock daemon (and the concrete stock
// values); the Epilog runs after every process of the job is gone and sees
// SLURM_JOB_EXIT_CODE(2), SLURM_SCRIPT_CONTEXT=epilog_slurmd, the job id and user;
// the Prolog and Epilog environments have the stock variable names and values.
func testExitCodes(t *testing.T, p pair) {
	type run struct {
		user     string
		tc       exitCase
		ref, sut jobOf
	}
	var runs []run
	for _, user := range []string{"root", cluster.TestUser} {
		for _, tc := range exitCases {
			sub := []string{"exit", tc.name}
			for _, c := range p.both() {
				d := c.WorkDir(t, user, sub...)
				touch(t, filepath.Join(d, markRecordEpilog))
				touch(t, filepath.Join(d, markRecordProlog))
				if tc.file != "" {
					touch(t, filepath.Join(d, tc.file))
				}
			}
			tc := tc
			ref, sut := submitBoth(t, p, user, "#!/bin/bash\n"+tc.script+"\n", func(c *cluster.Cluster) []string {
				return append([]string{"-J", "exit-" + tc.name, basicNodes(c)}, tc.args...)
			}, sub...)
			runs = append(runs, run{user: user, tc: tc, ref: ref, sut: sut})
		}
	}
	for _, r := range runs {
		what := r.user + "/" + r.tc.name
		want := r.tc.outcome(factsOf(t, p.ref))
		fr, fs := waitBoth(t, r.ref, r.sut, shortJobTimeout, want.state)
		sameFields(t, what, fr, fs, map[string]string{
			"JobState": want.state, "Reason": want.reason, "ExitCode": want.exitCode,
			"Restarts": "0", "BatchFlag": "1",
		}, "JobState", "Reason", "ExitCode", "Restarts", "BatchFlag")

		uid, gid, err := cluster.LookupUser(r.user)
		if err != nil {
			t.Fatal(err)
		}
		envs := map[*cluster.Cluster]map[string]string{}
		for _, j := range []jobOf{r.ref, r.sut} {
			lbl := what + " " + p.label(j.c)
			// The job is no longer COMPLETING: the Epilog has finished.
			env := parseEnv0(mustRead(t, filepath.Join(j.dir, "epilog."+j.id+".env")))
			envs[j.c] = env
			for k, want := range map[string]string{
				"SLURM_SCRIPT_CONTEXT": "epilog_slurmd",
				"SLURM_JOB_EXIT_CODE":  want.epilogCode,
				"SLURM_JOB_EXIT_CODE2": want.epilogCode2,
				"SLURM_JOB_ID":         j.id,
				"SLURM_JOBID":          j.id,
				"SLURM_JOB_USER":       r.user,
				"SLURM_JOB_UID":        strconv.Itoa(uid),
				"SLURM_JOB_GID":        strconv.Itoa(gid),
				"SLURM_UID":            strconv.Itoa(uid),
				"SLURM_JOB_WORK_DIR":   j.dir,
				"SLURM_CLUSTER_NAME":   j.c.Name,
				"SLURMD_NODENAME":      fr["BatchHost"],
				"SLURM_CONF":           j.c.ConfPath,
				"SLURM_JOB_PARTITION":  "debug",
			} {
				if k == "SLURMD_NODENAME" && j.c == p.sut {
					want = fs["BatchHost"]
				}
				if env[k] != want {
					t.Errorf("%s: epilog %s=%q, want %q", lbl, k, env[k], want)
				}
			}
			jf := map[*cluster.Cluster]map[string]string{p.ref: fr, p.sut: fs}[j.c]
			if factsOf(t, j.c).jobTimesInEnv {
				checkJobTimes(t, lbl+": epilog", env, jf, 0) // the job's real end
			}
			if procs := strings.TrimSpace(mustRead(t, filepath.Join(j.dir, "epilog."+j.id+".procs"))); procs != "0" {
				t.Errorf("%s: %s processes of the job still ran when the Epilog started, want 0", lbl, procs)
			}
		}
		nref, nsut := normalizer(p.ref, jobWords(r.ref, fr)), normalizer(p.sut, jobWords(r.sut, fs))
		compareEnv(t, what+": Epilog environment", envs[p.ref], envs[p.sut], nref, nsut)

		if r.tc.name == "exit0" {
			pr := parseEnv0(mustRead(t, filepath.Join(r.ref.dir, "prolog."+r.ref.id+".env")))
			ps := parseEnv0(mustRead(t, filepath.Join(r.sut.dir, "prolog."+r.sut.id+".env")))
			compareEnv(t, what+": Prolog environment", pr, ps, nref, nsut)
			for i, e := range []map[string]string{pr, ps} {
				if factsOf(t, p.ref).jobTimesInEnv {
					checkJobTimes(t, what+" "+p.label(p.both()[i])+": prolog", e, []map[string]string{fr, fs}[i], unlimitedSpan)
				}
				if e["SLURM_SCRIPT_CONTEXT"] != "prolog_slurmd" || e["SLURM_JOB_USER"] != r.user {
					t.Errorf("%s: prolog SLURM_SCRIPT_CONTEXT=%q SLURM_JOB_USER=%q, want prolog_slurmd, %s",
						what, e["SLURM_SCRIPT_CONTEXT"], e["SLURM_JOB_USER"], r.user)
				}
				if _, ok := e["SLURM_JOB_EXIT_CODE"]; ok {
					t.Errorf("%s: the Prolog has SLURM_JOB_EXIT_CODE (only the Epilog does)", what)
				}
			}
			// Standard output of a finished job.
			for _, j := range []jobOf{r.ref, r.sut} {
				if out := mustRead(t, filepath.Join(j.dir, "slurm-"+j.id+".out")); out != "hello\n" {
					t.Errorf("%s %s: slurm-%s.out = %q, want %q", what, p.label(j.c), j.id, out, "hello\n")
				}
			}
		}
		if r.tc.dirCreated != nil && factsOf(t, p.ref).stepdCreatesOutputDirs {
			for _, j := range []jobOf{r.ref, r.sut} {
				if out, ok := readJobFile(t, filepath.Join(j.dir, "no-such-dir", "out.txt")); out != "ran\n" {
					t.Errorf("%s %s: no-such-dir/out.txt = %q (exists %v), want %q in the directory the step manager created", what, p.label(j.c), out, ok, "ran\n")
				}
			}
		}
		// The I/O failure does not drain the node.
		if want.exitCode == stdoutUnopenable.exitCode {
			for _, j := range []jobOf{r.ref, r.sut} {
				f := j.c.ShowNode(t, j.c.ShowJob(t, j.id)["BatchHost"])
				if strings.Contains(f["State"], "DRAIN") {
					t.Errorf("%s %s: node %s is %s (Reason %q) after a job whose stdout could not be opened, want not drained",
						what, p.label(j.c), f["NodeName"], f["State"], f["Reason"])
				}
			}
		}
	}
}
