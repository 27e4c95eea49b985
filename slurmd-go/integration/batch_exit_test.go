//go:build integration

package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// exitCase is one batch script and what slurmctld and the Epilog see of its end.
// The stock values: slurmstepd sends the raw wait status of the batch shell
// (REQUEST_COMPLETE_BATCH_SCRIPT job_rc), slurmctld shows ExitCode
// "WEXITSTATUS:WTERMSIG" and the Epilog gets the raw status in SLURM_JOB_EXIT_CODE
// and "exit:signal" in SLURM_JOB_EXIT_CODE2.
type exitCase struct {
	name   string
	script string   // the lines after #!/bin/bash
	args   []string // extra sbatch arguments
	// scontrol show job
	state, reason, exitCode string
	// Epilog environment
	epilogCode, epilogCode2 string
}

var exitCases = []exitCase{
	{
		name: "exit0", script: "echo hello\nexit 0",
		state: "COMPLETED", reason: "None", exitCode: "0:0", epilogCode: "0", epilogCode2: "0:0",
	},
	{
		// A background child outlives the shell: the step is not over (and the Epilog
		// does not start) until it is killed.
		name:   "exit3",
		script: `bash -c "exec -a linger-$SLURM_CLUSTER_NAME-$SLURM_JOB_ID sleep 1000" &` + "\nexit 3",
		state:  "FAILED", reason: "NonZeroExitCode", exitCode: "3:0", epilogCode: "768", epilogCode2: "3:0",
	},
	{
		name: "sigkill", script: "kill -9 $$",
		state: "FAILED", reason: "JobLaunchFailure", exitCode: "0:9", epilogCode: "9", epilogCode2: "0:9",
	},
	{
		name: "sigusr1", script: "kill -USR1 $$",
		state: "FAILED", reason: "JobLaunchFailure", exitCode: "0:10", epilogCode: "10", epilogCode2: "0:10",
	},
	{
		// stdout cannot be opened: slurmstepd reports ESLURMD_IO_ERROR (4021 = 0xfb5) as
		// the job's status, which slurmctld reads as signal 0xfb5&0x7f = 53; the node is
		// not drained (batch jobs report slurm_rc 0 for I/O setup failures).
		name: "stdout-unopenable", script: "echo never", args: []string{"-o", "no-such-dir/out.txt"},
		state: "FAILED", reason: "JobLaunchFailure", exitCode: "0:53", epilogCode: "4021", epilogCode2: "0:53",
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
		fr, fs := waitBoth(t, r.ref, r.sut, shortJobTimeout, r.tc.state)
		sameFields(t, what, fr, fs, map[string]string{
			"JobState": r.tc.state, "Reason": r.tc.reason, "ExitCode": r.tc.exitCode,
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
				"SLURM_JOB_EXIT_CODE":  r.tc.epilogCode,
				"SLURM_JOB_EXIT_CODE2": r.tc.epilogCode2,
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
			for _, e := range []map[string]string{pr, ps} {
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
		// The I/O failure does not drain the node.
		if r.tc.name == "stdout-unopenable" {
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
