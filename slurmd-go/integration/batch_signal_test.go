//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// signalScript traps USR1 and USR2 in the batch shell and USR1 in a child bash of
// the same process group; every event goes to the file "marks".
const signalScript = `#!/bin/bash
trap 'echo shell-USR1 >> marks' USR1
trap 'echo shell-USR2 >> marks; exit 0' USR2
bash -c 'trap "echo child-USR1 >> marks" USR1; while :; do sleep 0.1; done' &
echo ready >> marks
while :; do sleep 0.1; done
`

// notifyMsg is the `scontrol notify` text.
const notifyMsg = "hello from scontrol notify"

// testSignals, as the ordinary user who owns the job:
//   - `scancel -s USR1` signals only the job's steps (KILL_STEPS_ONLY): a batch job
//     without steps gets nothing;
//   - `scontrol notify` writes "slurmstepd-<node>: error: <msg>" to the job's stderr
//     (26.05: "[<time>] error: <msg>", stepdErrorRe);
//   - `scancel -b -s USR1` (KILL_JOB_BATCH) reaches the batch shell only, not its
//     child in the same process group;
//   - `scancel --full -s USR1` (KILL_FULL_JOB) reaches the whole process group;
//   - `scancel -b -s USR2` makes the trap exit 0: COMPLETED 0:0.
func testSignals(t *testing.T, p pair) {
	u := cluster.TestUser
	ref, sut := submitBoth(t, p, u, signalScript, func(c *cluster.Cluster) []string {
		return []string{basicNodes(c)}
	}, "signals")
	jobs := []jobOf{ref, sut}
	marks := func(j jobOf) string { s, _ := readJobFile(t, filepath.Join(j.dir, "marks")); return s }
	stderrOf := func(j jobOf) string { s, _ := readJobFile(t, filepath.Join(j.dir, "slurm-"+j.id+".out")); return s }
	for _, j := range jobs {
		j.c.WaitJob(t, j.id, shortJobTimeout, "RUNNING")
		waitFileContains(t, j.c, filepath.Join(j.dir, "marks"), "ready", fileTimeout)
	}

	// Steps only: nothing reaches the batch shell. The notify sent afterwards goes
	// the same way (slurmctld -> slurmd -> slurmstepd); once its line is in stderr the
	// signal had its chance.
	for _, j := range jobs {
		j.c.MustRun(t, u, "scancel", "-s", "USR1", j.id)
		j.c.MustRun(t, u, "scontrol", "notify", j.id, notifyMsg)
	}
	for _, j := range jobs {
		host := j.c.ShowJob(t, j.id)["BatchHost"]
		re := stepdLineRe(factsOf(t, j.c), host, notifyMsg)
		j.c.WaitFor(t, fmt.Sprintf("slurm-%s.out to have %s", j.id, re), fileTimeout, func() (bool, string) {
			s := stderrOf(j)
			return re.MatchString(s), fmt.Sprintf("%q", s)
		})
	}
	time.Sleep(signalSettle)
	for _, j := range jobs {
		if m := marks(j); m != "ready\n" {
			t.Errorf("%s: after `scancel -s USR1` marks = %q, want only %q: a signal without --batch/--full must not reach the batch shell",
				p.label(j.c), m, "ready\n")
		}
	}

	// --batch: the shell only.
	for _, j := range jobs {
		j.c.MustRun(t, u, "scancel", "-b", "-s", "USR1", j.id)
	}
	for _, j := range jobs {
		waitFileContains(t, j.c, filepath.Join(j.dir, "marks"), "shell-USR1", fileTimeout)
	}
	time.Sleep(signalSettle)
	for _, j := range jobs {
		if m := marks(j); m != "ready\nshell-USR1\n" {
			t.Errorf("%s: after `scancel -b -s USR1` marks = %q, want %q (the batch shell only, not its process group)",
				p.label(j.c), m, "ready\nshell-USR1\n")
		}
	}

	// --full: the whole process group.
	for _, j := range jobs {
		j.c.MustRun(t, u, "scancel", "--full", "-s", "USR1", j.id)
	}
	for _, j := range jobs {
		var s string
		j.c.WaitFor(t, "the --full USR1 in the shell and the child", fileTimeout, func() (bool, string) {
			s = marks(j)
			return strings.Count(s, "shell-USR1") >= 2 && strings.Contains(s, "child-USR1"), fmt.Sprintf("%q", s)
		})
		time.Sleep(signalSettle)
		if s = marks(j); strings.Count(s, "shell-USR1") != 2 || strings.Count(s, "child-USR1") != 1 {
			t.Errorf("%s: after `scancel --full -s USR1` marks = %q, want the shell twice and the child once", p.label(j.c), s)
		}
	}

	// USR2 ends the job.
	for _, j := range jobs {
		j.c.MustRun(t, u, "scancel", "-b", "-s", "USR2", j.id)
	}
	fr, fs := waitBoth(t, ref, sut, shortJobTimeout, "COMPLETED")
	sameFields(t, "signals", fr, fs, map[string]string{"JobState": "COMPLETED", "ExitCode": "0:0"}, "JobState", "ExitCode", "Reason")

	// slurmstepd's lines in stderr are the same on both: the notify line only (the
	// shell's own messages, e.g. "User defined signal 1" for a foreground sleep killed
	// by --full, are bash's).
	for _, x := range []struct {
		j jobOf
		f map[string]string
	}{{ref, fr}, {sut, fs}} {
		facts := factsOf(t, x.j.c)
		anyLine := regexp.MustCompile(`^` + stepdErrorRe(facts, x.f["BatchHost"]))
		var got []string
		for _, line := range strings.Split(stderrOf(x.j), "\n") {
			if anyLine.MatchString(line) {
				got = append(got, line)
			}
		}
		if len(got) != 1 || !stepdLineRe(facts, x.f["BatchHost"], notifyMsg).MatchString(got[0]) {
			t.Errorf("%s: slurmstepd lines in stderr %q, want only the notify line (%s)", p.label(x.j.c), got, stepdLineRe(facts, x.f["BatchHost"], notifyMsg))
		}
	}
}

// scancelScript traps TERM (and goes on), starts a child ignoring TERM in its
// process group and another ignoring TERM in a new session (outside the process
// group: only the cgroup still holds it). Every process name carries the marker.
func scancelScript(marker string) string {
	return fmt.Sprintf(`#!/bin/bash
trap 'echo got-TERM >> marks' TERM
bash -c "trap '' TERM; exec -a %[1]s-child sleep 1000" &
setsid bash -c "trap '' TERM; exec -a %[1]s-setsid sleep 1000" &
echo ready >> marks
while :; do sleep 0.1; done
`, marker)
}

// testScancel: `scancel` of a running job whose shell and children survive SIGTERM:
// the shell sees TERM, the processes live on for KillWait and are then all gone,
// including the one in its own session; the job ends CANCELLED with ExitCode 0:9
// (the shell was SIGKILLed); stderr has the stock CANCELLED line; the node returns
// to IDLE.
func testScancel(t *testing.T, p pair) {
	u := cluster.TestUser
	type run struct {
		j      jobOf
		marker string
		sent   time.Time
		last   time.Time // a marked process was last seen
	}
	var runs []*run
	for _, c := range p.both() {
		marker := "bscancel-" + c.Name
		dir := c.WorkDir(t, u, "scancel")
		id := c.SbatchIn(t, u, dir, scancelScript(marker), "-w", node(c, nodeScancel))
		runs = append(runs, &run{j: jobOf{c: c, id: id, dir: dir}, marker: marker})
	}
	for _, r := range runs {
		r.j.c.WaitJob(t, r.j.id, shortJobTimeout, "RUNNING")
		waitFileContains(t, r.j.c, filepath.Join(r.j.dir, "marks"), "ready", fileTimeout)
		r.j.c.WaitFor(t, "both marked children", fileTimeout, func() (bool, string) {
			n := pgrepCount(t, r.marker)
			return n == 2, fmt.Sprintf("%d processes match %q", n, r.marker)
		})
	}
	for _, r := range runs {
		r.sent = time.Now()
		r.j.c.MustRun(t, u, "scancel", r.j.id)
	}
	// Poll both until every marked process is gone.
	deadline := time.Now().Add(killTimeout)
	for {
		alive := 0
		for _, r := range runs {
			if pgrepCount(t, r.marker) > 0 {
				r.last = time.Now()
				alive++
			}
		}
		if alive == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, r := range runs {
				if n := pgrepCount(t, r.marker); n > 0 {
					out, _ := exec2("pgrep", "-af", r.marker)
					t.Errorf("%s: %d processes of the cancelled job still run %v after scancel:\n%s", p.label(r.j.c), n, killTimeout, out)
				}
			}
			t.FailNow()
		}
		time.Sleep(filePoll)
	}
	for _, r := range runs {
		lived := r.last.Sub(r.sent)
		t.Logf("%s: TERM-ignoring processes last seen %v after scancel", p.label(r.j.c), lived.Round(10*time.Millisecond))
		if lived < batchKillWait {
			t.Errorf("%s: the TERM-ignoring processes were gone %v after scancel, want them to live KillWait (%v; stock: MAX(KillWait,5 s))",
				p.label(r.j.c), lived, batchKillWait)
		}
	}
	fr, fs := waitBoth(t, runs[0].j, runs[1].j, shortJobTimeout, "CANCELLED")
	sameFields(t, "scancel", fr, fs, map[string]string{"JobState": "CANCELLED", "Reason": "None", "ExitCode": "0:9"},
		"JobState", "Reason", "ExitCode")
	for _, r := range runs {
		lbl := p.label(r.j.c)
		if m := mustRead(t, filepath.Join(r.j.dir, "marks")); !strings.Contains(m, "got-TERM") {
			t.Errorf("%s: marks = %q: the batch shell never saw SIGTERM", lbl, m)
		}
		host := node(r.j.c, nodeScancel)
		out := mustRead(t, filepath.Join(r.j.dir, "slurm-"+r.j.id+".out"))
		facts := factsOf(t, r.j.c)
		end := ""
		if facts.stepdLogTimestamp {
			end = " DUE to SIGNAL Terminated"
		}
		re := regexp.MustCompile(`(?m)^` + stepdErrorRe(facts, host) + regexp.QuoteMeta("*** JOB "+r.j.id+" ON "+host+" CANCELLED AT ") +
			`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d` + regexp.QuoteMeta(end+" ***") + `$`)
		if !re.MatchString(out) {
			t.Errorf("%s: stderr lacks the cancel line (%s):\n%s", lbl, re, out)
		}
		r.j.c.WaitNodes(t, "idle", []string{host}, nodeIdleTimeout)
	}
}

// timeLimitScript traps USR1 in the shell and in a child of its process group.
const timeLimitScript = `#!/bin/bash
trap 'echo "shell-USR1 $(date +%s)" >> marks' USR1
bash -c 'trap "echo child-USR1 >> marks" USR1; while :; do sleep 0.2; done' &
echo "start $(date +%s)" >> marks
while :; do sleep 0.2; done
`

// testTimeLimit: a --time=1 job that runs forever with --signal=B:USR1@50: slurmctld
// sends USR1 at its first time-limit check within 50+30 s of the end (here: at the
// first check, 0-30 s after start) to the batch shell only; after the limit
// (60-90 s: checks every 30 s) the job is killed: TIMEOUT, Reason TimeLimit, ExitCode
// 0:15 (the shell dies of SIGTERM), and stderr has
// "slurmstepd-<node>: error: *** JOB <id> ON <node> CANCELLED AT <time> DUE TO TIME LIMIT ***".
func testTimeLimit(t *testing.T, p pair) {
	ref, sut := submitBoth(t, p, "root", timeLimitScript, func(c *cluster.Cluster) []string {
		return []string{"-w", node(c, nodeTimeLimit), "--time=1", "--signal=B:USR1@50"}
	}, "timelimit")
	fr, fs := waitBoth(t, ref, sut, timeLimitBound, "TIMEOUT")
	sameFields(t, "timelimit", fr, fs, map[string]string{"JobState": "TIMEOUT", "Reason": "TimeLimit", "ExitCode": "0:15"},
		"JobState", "Reason", "ExitCode", "TimeLimit")
	for _, j := range []jobOf{ref, sut} {
		f := fr
		if j.c == p.sut {
			f = fs
		}
		lbl := p.label(j.c)
		start, err1 := cluster.ParseSlurmTime(f["StartTime"])
		end, err2 := cluster.ParseSlurmTime(f["EndTime"])
		if err1 != nil || err2 != nil || end.Sub(start) < time.Minute {
			t.Errorf("%s: StartTime %s EndTime %s: want at least the 1 minute limit", lbl, f["StartTime"], f["EndTime"])
		}
		m := mustRead(t, filepath.Join(j.dir, "marks"))
		if !regexp.MustCompile(`^start \d+\nshell-USR1 \d+\n$`).MatchString(m) {
			t.Errorf("%s: marks = %q: want the USR1 of --signal=B:USR1@50 once, in the batch shell only", lbl, m)
		}
		host := node(j.c, nodeTimeLimit)
		out := mustRead(t, filepath.Join(j.dir, "slurm-"+j.id+".out"))
		re := regexp.MustCompile(`(?m)^` + stepdErrorRe(factsOf(t, j.c), host) + regexp.QuoteMeta("*** JOB "+j.id+" ON "+host+" CANCELLED AT ") +
			`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d DUE TO TIME LIMIT \*\*\*$`)
		if !re.MatchString(out) {
			t.Errorf("%s: stderr lacks the time-limit line (%s):\n%s", lbl, re, out)
		}
	}
}
