//go:build integration

package integration

import (
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// envScript records what the batch shell sees. The job's working directory is its
// own, so the file names are fixed.
const envScript = `#!/bin/bash
env -0 > env.out
umask > umask.out
pwd > pwd.out
id > id.out
ulimit -a > ulimit.out
echo $$ > pid.out
`

// envNondeterministic are the batch environment variables whose values may differ
// between two runs of the same job on the same cluster.
var envNondeterministic = []string{"SLURM_TASK_PID"}

// testEnvironment: the batch shell's environment has exactly the stock variable
// names and (normalized) values, for root and the ordinary user, on one node and on
// two; concrete values are checked against the job and the cluster; umask, working
// directory, `id` and `ulimit -a` are those of the stock daemon.
func testEnvironment(t *testing.T, p pair) {
	type envCase struct {
		name, user string
		args       []string
		nodes      int
	}
	cases := []envCase{
		{name: "root", user: "root", args: []string{"-J", "envjob"}, nodes: 1},
		{name: "user", user: cluster.TestUser, args: []string{"-J", "envjob"}, nodes: 1},
		{name: "root-2nodes", user: "root", args: []string{"-J", "envjob2", "-N2", "-n2"}, nodes: 2},
	}
	type run struct {
		tc       envCase
		ref, sut jobOf
	}
	var runs []run
	for _, tc := range cases {
		tc := tc
		ref, sut := submitBoth(t, p, tc.user, envScript, func(c *cluster.Cluster) []string {
			return append([]string{basicNodes(c)}, tc.args...)
		}, "env", tc.name)
		runs = append(runs, run{tc: tc, ref: ref, sut: sut})
	}
	userEnvs := map[string]map[string]string{} // case name -> reference env
	for _, r := range runs {
		what := "env/" + r.tc.name
		fr, fs := waitBoth(t, r.ref, r.sut, shortJobTimeout, "COMPLETED")
		fields := map[*cluster.Cluster]map[string]string{p.ref: fr, p.sut: fs}
		envs := map[*cluster.Cluster]map[string]string{}
		files := map[*cluster.Cluster]map[string]string{}
		for _, j := range []jobOf{r.ref, r.sut} {
			env := parseEnv0(mustRead(t, filepath.Join(j.dir, "env.out")))
			envs[j.c] = env
			fm := map[string]string{}
			for _, f := range []string{"umask.out", "pwd.out", "id.out", "ulimit.out", "pid.out"} {
				fm[f] = strings.TrimSpace(mustRead(t, filepath.Join(j.dir, f)))
			}
			files[j.c] = fm
			checkBatchEnv(t, what+" "+p.label(j.c), j, r.tc.user, r.tc.nodes, fields[j.c], env, fm)
		}
		userEnvs[r.tc.name] = envs[p.ref]
		nref, nsut := normalizer(p.ref, jobWords(r.ref, fr)), normalizer(p.sut, jobWords(r.sut, fs))
		compareEnv(t, what, envs[p.ref], envs[p.sut], nref, nsut, envNondeterministic...)
		for _, f := range []string{"umask.out", "pwd.out", "id.out", "ulimit.out"} {
			if a, b := nref(files[p.ref][f]), nsut(files[p.sut][f]); a != b {
				t.Errorf("%s: %s differs:\nreference:\n%s\nunder test:\n%s", what, f, a, b)
			}
		}
	}
	// Root and an ordinary user get the same variables.
	if a, b := diffNames(userEnvs["root"], userEnvs["user"]); len(a)+len(b) > 0 {
		t.Errorf("reference: variables only for root %v, only for %s %v (stock gives both the same set)", a, cluster.TestUser, b)
	}
}

// checkBatchEnv checks concrete values of a batch shell's environment and process
// attributes against the job (fields of `scontrol show job`) and its cluster.
func checkBatchEnv(t *testing.T, what string, j jobOf, userName string, nodes int, f, env, files map[string]string) {
	t.Helper()
	uid, gid, err := cluster.LookupUser(userName)
	if err != nil {
		t.Fatal(err)
	}
	home := "/"
	if userName == "root" {
		home = "/root"
	}
	host := f["BatchHost"]
	cpusPerNode := "1"
	if nodes > 1 {
		cpusPerNode = fmt.Sprintf("1(x%d)", nodes)
	}
	want := map[string]string{
		"ENVIRONMENT":                 "BATCH",
		"HOSTNAME":                    host,
		"SLURMD_NODENAME":             host,
		"SLURM_TOPOLOGY_ADDR":         host,
		"SLURM_TOPOLOGY_ADDR_PATTERN": "node",
		"SLURM_CLUSTER_NAME":          j.c.Name,
		"SLURM_CONF":                  j.c.ConfPath,
		"SLURM_JOB_ID":                j.id,
		"SLURM_JOBID":                 j.id,
		"SLURM_JOB_NAME":              f["JobName"],
		"SLURM_JOB_NODELIST":          f["NodeList"],
		"SLURM_NODELIST":              f["NodeList"],
		"SLURM_JOB_NUM_NODES":         strconv.Itoa(nodes),
		"SLURM_NNODES":                strconv.Itoa(nodes),
		"SLURM_JOB_PARTITION":         "debug",
		"SLURM_JOB_CPUS_PER_NODE":     cpusPerNode,
		"SLURM_TASKS_PER_NODE":        cpusPerNode,
		"SLURM_CPUS_ON_NODE":          "1",
		"SLURM_NODEID":                "0",
		"SLURM_PROCID":                "0",
		"SLURM_LOCALID":               "0",
		"SLURM_GTIDS":                 "0",
		"SLURM_JOB_UID":               strconv.Itoa(uid),
		"SLURM_JOB_GID":               strconv.Itoa(gid),
		"SLURM_JOB_USER":              userName,
		"SLURM_MEM_PER_CPU":           strconv.Itoa(batchMemPerCPU),
		"SLURM_SUBMIT_DIR":            j.dir,
		"SLURM_TASK_PID":              files["pid.out"], // the batch shell itself
		"TMPDIR":                      "/tmp",
		// From the submission environment (sbatch --export=ALL).
		"USER": userName,
		"HOME": home,
		"PATH": cluster.CleanPath,
		"PWD":  j.dir,
	}
	if nodes > 1 {
		want["SLURM_NTASKS"] = strconv.Itoa(nodes)
		want["SLURM_NPROCS"] = strconv.Itoa(nodes)
	}
	unset := []string{"SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT"}
	facts := factsOf(t, j.c)
	if facts.batchStepIDVars {
		want["SLURM_STEP_ID"] = "-5"
		want["SLURM_STEPID"] = "-5"
	} else {
		unset = append(unset, "SLURM_STEP_ID", "SLURM_STEPID")
	}
	if !facts.jobSLUID {
		unset = append(unset, "SLURM_JOB_SLUID")
	} else if v := env["SLURM_JOB_SLUID"]; !jobIDVars["SLURM_JOB_SLUID"].MatchString(v) {
		t.Errorf("%s: SLURM_JOB_SLUID=%q, want the form %s", what, v, jobIDVars["SLURM_JOB_SLUID"])
	}
	if facts.batchEnvWorkingCluster {
		want["SLURM_NODE_ALIASES"] = "(null)"
		want["SLURM_WORKING_CLUSTER"] = fmt.Sprintf("%s:127.0.0.1:%d:%d:109", j.c.Name, j.c.CtldPort, j.c.ProtocolVersion)
	} else {
		unset = append(unset, "SLURM_NODE_ALIASES", "SLURM_WORKING_CLUSTER")
	}
	if facts.jobTimesInEnv {
		want["SLURM_OOM_KILL_STEP"] = "0"
		checkJobTimes(t, what, env, f, unlimitedSpan)
	} else {
		unset = append(unset, jobTimeVars...)
		unset = append(unset, "SLURM_OOM_KILL_STEP")
	}
	for k, w := range want {
		if got, ok := env[k]; !ok || got != w {
			t.Errorf("%s: %s=%q (set %v), want %q", what, k, got, ok, w)
		}
	}
	for _, k := range unset {
		if v, ok := env[k]; ok {
			t.Errorf("%s: %s=%q is set; the stock batch shell of a plain first run (Slurm %s) has none", what, k, v, j.c.Release)
		}
	}
	if files["umask.out"] != "0022" {
		t.Errorf("%s: umask %q, want 0022 (the submitter's)", what, files["umask.out"])
	}
	if files["pwd.out"] != j.dir {
		t.Errorf("%s: working directory %q, want %q", what, files["pwd.out"], j.dir)
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(strconv.Itoa(gid))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("uid=%d(%s) gid=%d(%s) groups=%d(%s)", uid, u.Username, gid, g.Name, gid, g.Name); !strings.HasPrefix(files["id.out"], want) {
		t.Errorf("%s: id = %q, want prefix %q", what, files["id.out"], want)
	}
	// RLIMIT_RSS is set to the job's memory on the node (DefMemPerCPU x 1 CPU).
	if want := fmt.Sprintf("max memory size             (kbytes, -m) %d", batchMemPerCPU*1024); !strings.Contains(files["ulimit.out"], want) {
		t.Errorf("%s: ulimit -a lacks %q:\n%s", what, want, files["ulimit.out"])
	}
}
