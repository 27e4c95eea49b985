//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// The stock slurmd after a failed Prolog (what changed since 22.05.8 is in
// stockFacts: the job's output, BatchFlag, the ExitCode with PrologFlags=Alloc and
// the Reason after resume):
const (
	// The drain reason slurmctld records (registration status ESLURMD_PROLOG_FAILED,
	// node_mgr.c), shown as "Prolog error [<SlurmUser>@<time>]".
	prologDrainReason = "Prolog error"
	// The requeued job is held: PENDING, Priority 0, this reason, Restarts 1.
	prologHeldReason = "launch_failed_requeued_held"
	// A requeued job becomes eligible only after the credential expiry window
	// (slurmctld _job_requeue_op: begin_time = now + 120 + 1).
	requeueMinDelay = 100 * time.Second
)

var prologReasonRe = regexp.MustCompile(`^` + regexp.QuoteMeta(prologDrainReason) + ` \[root@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]$`)

// testPrologFailure: a Prolog exiting 1 drains the node with reason "Prolog error",
// writes the stock message to the job's output in 22.05 without PrologFlags=Alloc
// (22.05 with it, and 24.11 either way: no output file at all; with Alloc the batch
// launch never happens), and requeues the job held
// (PENDING, launch_failed_requeued_held, Restarts=1, Priority 0); the Prolog saw the
// stock environment. After `scontrol update nodename=... state=resume`, release and
// StartTime=now the same job runs (SLURM_RESTART_COUNT=1) and completes.
func testPrologFailure(t *testing.T, p pair, alloc bool) {
	u := "root"
	for _, c := range p.both() {
		d := c.WorkDir(t, u, "prolog")
		touch(t, filepath.Join(d, markFailProlog))
		touch(t, filepath.Join(d, markRecordProlog))
		touch(t, filepath.Join(d, markRecordEpilog))
	}
	script := "#!/bin/bash\necho \"ran restart=$SLURM_RESTART_COUNT\"\n"
	ref, sut := submitBoth(t, p, u, script, func(c *cluster.Cluster) []string {
		return []string{"-w", node(c, nodePrologBad)}
	}, "prolog")
	jobs := []jobOf{ref, sut}
	failedAt := time.Now()
	facts := factsOf(t, p.ref)
	wantOutput := facts.prologErrorOutput
	if alloc {
		wantOutput = ""
	}

	held := map[*cluster.Cluster]map[string]string{}
	for _, j := range jobs {
		lbl := p.label(j.c)
		n := node(j.c, nodePrologBad)
		j.c.WaitNodes(t, "drained", []string{n}, drainTimeout)
		f := j.c.ShowNode(t, n)
		if f["State"] != "IDLE+DRAIN" || !prologReasonRe.MatchString(f["Reason"]) {
			t.Errorf("%s: node %s State=%q Reason=%q, want IDLE+DRAIN and %s", lbl, n, f["State"], f["Reason"], prologReasonRe)
		}
		j.c.WaitFor(t, "job "+j.id+" requeued and held", drainTimeout, func() (bool, string) {
			f := j.c.ShowJob(t, j.id)
			held[j.c] = f
			return f["Reason"] == prologHeldReason, fmt.Sprintf("JobState=%s Reason=%s Restarts=%s", f["JobState"], f["Reason"], f["Restarts"])
		})
		out, ok := readJobFile(t, filepath.Join(j.dir, "slurm-"+j.id+".out"))
		switch {
		case wantOutput == "" && ok:
			t.Errorf("%s: the batch script never ran (Slurm %s, PrologFlags=Alloc %v), yet slurm-%s.out exists: %q", lbl, j.c.Release, alloc, j.id, out)
		case wantOutput != "" && out != wantOutput:
			t.Errorf("%s: job output after the failed prolog = %q (exists %v), want %q", lbl, out, ok, wantOutput)
		}
		if el, err := cluster.ParseSlurmTime(held[j.c]["EligibleTime"]); err != nil || el.Sub(failedAt) < requeueMinDelay {
			t.Errorf("%s: requeued job EligibleTime=%s, want >= %v after the failure", lbl, held[j.c]["EligibleTime"], requeueMinDelay)
		}
	}
	exitCode := "0:0"
	if alloc {
		exitCode = facts.prologAllocExitCode
	}
	sameFields(t, "prolog failure", held[p.ref], held[p.sut], map[string]string{
		"JobState": "PENDING", "Reason": prologHeldReason, "Restarts": "1", "Priority": "0",
		"BatchFlag": facts.prologBatchFlag, "ExitCode": exitCode,
	}, "JobState", "Reason", "Restarts", "Priority", "BatchFlag", "ExitCode")

	ids := func(j jobOf) map[string]string { return jobWords(j, held[j.c]) }
	pr := parseEnv0(mustRead(t, filepath.Join(ref.dir, "prolog."+ref.id+".env")))
	ps := parseEnv0(mustRead(t, filepath.Join(sut.dir, "prolog."+sut.id+".env")))
	compareEnv(t, "failing Prolog environment", pr, ps, normalizer(p.ref, ids(ref)), normalizer(p.sut, ids(sut)))
	for _, x := range []struct {
		j   jobOf
		env map[string]string
	}{{ref, pr}, {sut, ps}} {
		if facts.jobTimesInEnv {
			// The requeued job's StartTime is no longer the prolog's: only the span.
			if span, ok := jobTimeSpan(x.env); !ok || span != unlimitedSpan {
				t.Errorf("%s: prolog %s - %s = %v (valid %v), want %v", p.label(x.j.c), jobTimeVars[1], jobTimeVars[0], span, ok, unlimitedSpan)
			}
		}
		if x.env["SLURM_SCRIPT_CONTEXT"] != "prolog_slurmd" || x.env["SLURM_JOB_ID"] != x.j.id || x.env["SLURM_JOB_RESTART_COUNT"] != "0" {
			t.Errorf("%s: prolog SLURM_SCRIPT_CONTEXT=%q SLURM_JOB_ID=%q SLURM_JOB_RESTART_COUNT=%q, want prolog_slurmd, %s, 0",
				p.label(x.j.c), x.env["SLURM_SCRIPT_CONTEXT"], x.env["SLURM_JOB_ID"], x.env["SLURM_JOB_RESTART_COUNT"], x.j.id)
		}
	}
	// The Epilog runs for the terminated launch on both or on neither.
	_, er := readJobFile(t, filepath.Join(ref.dir, "epilog."+ref.id+".env"))
	_, es := readJobFile(t, filepath.Join(sut.dir, "epilog."+sut.id+".env"))
	if er != es {
		t.Errorf("after the failed prolog: Epilog ran on the reference %v, under test %v", er, es)
	}

	// Resume the node; release the job and make it eligible now.
	for _, j := range jobs {
		if err := os.Remove(filepath.Join(j.dir, markFailProlog)); err != nil {
			t.Fatal(err)
		}
		n := node(j.c, nodePrologBad)
		j.c.MustRun(t, "", "scontrol", "update", "nodename="+n, "state=resume")
		j.c.WaitNodes(t, "idle", []string{n}, nodeIdleTimeout)
		f := j.c.ShowNode(t, n)
		switch {
		case facts.prologReasonKept && !prologReasonRe.MatchString(f["Reason"]):
			t.Errorf("%s: node %s Reason=%q after resume, want the drain reason kept (%s, as stock %s)", p.label(j.c), n, f["Reason"], prologReasonRe, p.ref.StockVersion)
		case !facts.prologReasonKept && f["Reason"] != "":
			t.Errorf("%s: node %s Reason=%q after resume, want none", p.label(j.c), n, f["Reason"])
		}
		j.c.MustRun(t, "", "scontrol", "release", j.id)
		j.c.MustRun(t, "", "scontrol", "update", "jobid="+j.id, "StartTime=now")
	}
	fr, fs := waitBoth(t, ref, sut, shortJobTimeout, "COMPLETED")
	sameFields(t, "requeued job", fr, fs, map[string]string{"JobState": "COMPLETED", "ExitCode": "0:0", "Restarts": "1"},
		"JobState", "ExitCode", "Restarts", "Reason")
	for _, j := range jobs {
		lbl := p.label(j.c)
		if out := mustRead(t, filepath.Join(j.dir, "slurm-"+j.id+".out")); out != "ran restart=1\n" {
			t.Errorf("%s: requeued job output %q, want %q (truncated, SLURM_RESTART_COUNT=1)", lbl, out, "ran restart=1\n")
		}
		env := parseEnv0(mustRead(t, filepath.Join(j.dir, "prolog."+j.id+".env")))
		if env["SLURM_JOB_RESTART_COUNT"] != "1" {
			t.Errorf("%s: second Prolog SLURM_JOB_RESTART_COUNT=%q, want 1", lbl, env["SLURM_JOB_RESTART_COUNT"])
		}
	}
}
