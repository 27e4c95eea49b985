//go:build integration

package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// userEnvScript records the batch shell's environment and limits (which
// the login environment's SLURM_RLIMIT_* set).
const userEnvScript = `#!/bin/bash
env -0 > env.out
ulimit -a > ulimit.out
`

// testUserEnvironment: sbatch --export=NONE and --get-user-env make slurmd load
// the user's login environment (su - <user> on the node) under the passed one;
// the batch shell sees the same variable names and values, and the same limits,
// as under the stock daemon, for root and for TestUser. TestUser's shell is
// /usr/sbin/nologin, so su fails for it and stock runs the job with the passed
// environment only; root's login environment is the real one. --get-user-env's
// timeout and S/L mode (before 26.05) never reach the node (slurmd always waits
// 120 s for "su -").
//
// Normalized as in every batch comparison: the cluster directory, cluster name,
// node name prefix, job id, batch host and slurmctld port; SLURM_TASK_PID and the
// job-time and job-id variables are compared by form.
func testUserEnvironment(t *testing.T, p pair) {
	type ueCase struct{ name, user, arg string }
	cases := []ueCase{
		{"root-export-none", "root", "--export=NONE"},
		{"root-get-user-env", "root", "--get-user-env"},
	}
	// Where su's failure drains the node, TestUser's jobs would take a node of
	// TestBatch's shared cluster away from the other subtests.
	if !factsOf(t, p.ref).userEnvFailureDrains {
		cases = append(cases,
			ueCase{"user-export-none", cluster.TestUser, "--export=NONE"},
			ueCase{"user-get-user-env", cluster.TestUser, "--get-user-env"})
	}
	if factsOf(t, p.ref).getUserEnvArg {
		cases = append(cases, ueCase{"root-get-user-env-5S", "root", "--get-user-env=5S"})
	}
	type run struct {
		tc       ueCase
		ref, sut jobOf
	}
	var runs []run
	for _, tc := range cases {
		ref, sut := submitBoth(t, p, tc.user, userEnvScript, func(c *cluster.Cluster) []string {
			return []string{basicNodes(c), "-J", "uenv", tc.arg}
		}, "userenv", tc.name)
		runs = append(runs, run{tc: tc, ref: ref, sut: sut})
	}
	// What only root's login shell gives (stock's reference must have it too).
	loginOnly := map[string]string{"SHELL": "/bin/bash", "MAIL": "/var/mail/root"}
	for _, r := range runs {
		what := "userenv/" + r.tc.name
		fr, fs := waitBoth(t, r.ref, r.sut, shortJobTimeout, "COMPLETED")
		envs := map[*cluster.Cluster]map[string]string{}
		limits := map[*cluster.Cluster]string{}
		for _, j := range []jobOf{r.ref, r.sut} {
			envs[j.c] = parseEnv0(mustRead(t, filepath.Join(j.dir, "env.out")))
			limits[j.c] = strings.TrimSpace(mustRead(t, filepath.Join(j.dir, "ulimit.out")))
		}
		nref, nsut := normalizer(p.ref, jobWords(r.ref, fr)), normalizer(p.sut, jobWords(r.sut, fs))
		compareEnv(t, what, envs[p.ref], envs[p.sut], nref, nsut, envNondeterministic...)
		if a, b := nref(limits[p.ref]), nsut(limits[p.sut]); a != b {
			t.Errorf("%s: ulimit -a differs:\nreference:\n%s\nunder test:\n%s", what, a, b)
		}
		for _, c := range p.both() {
			env := envs[c]
			if r.tc.user == "root" {
				for k, v := range loginOnly {
					if env[k] != v {
						t.Errorf("%s %s: %s=%q, want %q from root's login shell", what, p.label(c), k, env[k], v)
					}
				}
			}
			if r.tc.arg == "--export=NONE" {
				// Nothing of sbatch's own environment but SLURM_*: the login
				// shell's PATH, root's HOME and LOGNAME.
				if r.tc.user == "root" && (env["HOME"] != "/root" || env["LOGNAME"] != "root") {
					t.Errorf("%s %s: HOME=%q LOGNAME=%q, want root's login values", what, p.label(c), env["HOME"], env["LOGNAME"])
				}
			}
			if _, ok := env["SLURM_GET_USER_ENV"]; !ok {
				t.Errorf("%s %s: SLURM_GET_USER_ENV missing (sbatch sets it)", what, p.label(c))
			}
		}
	}
}
