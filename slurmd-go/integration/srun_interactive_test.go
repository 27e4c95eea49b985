//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// sigintExit is srun's exit status after Ctrl-C Ctrl-C (measured on the stock daemon).
const sigintExit = 130

// sigintRun is one cluster's part of testSrunSigint.
type sigintRun struct {
	r        cluster.Result
	err      error  // a step of the sequence failed
	leftover string // pgrep -af of the task's processes still there
}

// testSrunSigint: two SIGINTs to srun within a second (Ctrl-C Ctrl-C) end the step:
// srun exits with the stock status and no process of the task (a sleep 300) is left.
// Where srun does not abort on the second SIGINT (stockFacts.doubleSigintAborts), one
// SIGINT to `srun --quit-on-interrupt` ends the step the same way.
func testSrunSigint(t *testing.T, p pair) {
	dirs := workDirs(t, p, "root", "sigint")
	ref, sut := onBoth(p, func(c *cluster.Cluster) sigintRun {
		return withSlot(c, func() sigintRun { return sigintOn(t, c, dirs[c]) })
	})
	for _, x := range []struct {
		c   *cluster.Cluster
		run sigintRun
	}{{p.ref, ref}, {p.sut, sut}} {
		if x.run.err != nil {
			t.Fatalf("%s: %v", p.label(x.c), x.run.err)
		}
		if x.run.leftover != "" {
			t.Errorf("%s: the task's processes still run %v after srun was interrupted:\n%s", p.label(x.c), taskGoneTimeout, x.run.leftover)
		}
		t.Logf("%s: srun after its SIGINTs: %v", p.label(x.c), x.run.r)
	}
	wantExit(t, p, ref.r, sut.r, sigintExit)
}

// sigintOn starts `srun sleep 300` (renamed to a marker unique to the cluster),
// waits for the task, sends SIGINT twice sigintGap apart and waits for srun and the
// task to end. It runs in a goroutine of onBoth: errors are returned.
func sigintOn(t *testing.T, c *cluster.Cluster, dir string) sigintRun {
	marker := "srunint-" + c.Name
	// ^: srun's own command line contains the marker too, not at its start.
	pattern := "^" + marker
	double := factsOf(t, c).doubleSigintAborts
	args := []string{"-n1", "-w", node(c, 0)}
	if !double {
		args = append(args, "--quit-on-interrupt")
	}
	cl, err := c.StartClient(t, srunCmd("root", dir, bgStepTimeout, append(args, "bash", "-c", "exec -a "+marker+" sleep 300")...))
	if err != nil {
		return sigintRun{err: err}
	}
	if !poll(stepRunTimeout, func() bool { return cl.Exited() || pgrepCount(t, pattern) == 1 }) {
		cl.Kill()
		return sigintRun{err: fmt.Errorf("the task did not run within %v: %v", stepRunTimeout, cl.Wait())}
	}
	if cl.Exited() {
		return sigintRun{err: fmt.Errorf("srun ended before its task ran: %v", cl.Wait())}
	}
	if err := cl.Signal(syscall.SIGINT); err != nil {
		return sigintRun{err: err}
	}
	if double {
		time.Sleep(sigintGap)
		if err := cl.Signal(syscall.SIGINT); err != nil {
			return sigintRun{err: fmt.Errorf("second SIGINT: %w: %v", err, cl.Wait())}
		}
	}
	r, ok := cl.WaitTimeout(sigintExitTimeout)
	if !ok {
		cl.Kill()
		return sigintRun{err: fmt.Errorf("srun still ran %v after the last SIGINT (double %v): %v", sigintExitTimeout, double, cl.Wait())}
	}
	run := sigintRun{r: r}
	if !poll(taskGoneTimeout, func() bool { return pgrepCount(t, pattern) == 0 }) {
		run.leftover, _ = exec2("pgrep", "-af", pattern)
	}
	return run
}

// ptyScript drives `srun --pty bash`: wait for the prompt, compute 6*7, read the
// terminal's size, resize srun's terminal and read it again, exit. The commands echo as
// typed ("XX$((6*7))YY"), so only bash's answers match "XX42YY" and the sizes. srun
// starts on a 33x101 terminal (the task's PTY gets it from SLURM_PTY_WIN_ROW/COL); the
// resize reaches srun as SIGWINCH and the task through srun's PTY connection, which takes
// a while on a loaded machine: the task polls its size for up to 10 s. The resize is one
// TIOCSWINSZ, as a terminal makes it: `stty rows R columns C` makes two, and srun's pty
// thread can lose the second SIGWINCH (it clears its flag after reading the size), on
// stock and slurmd-go alike (CI: 40x101 where 40x120 was set). bash skips
// its rc files: the prompt must not depend on the user's.
func ptyScript(args []string) string {
	return fmt.Sprintf(`log_user 1
set timeout %d
spawn %s
stty rows 33 columns 101 < $spawn_out(slave,name)
expect {
	-re {[$#] $} {}
	timeout { puts "\nEXPECT: no prompt"; exit 2 }
	eof { puts "\nEXPECT: srun ended before the prompt"; exit 2 }
}
set timeout %d
send "echo XX\$((6*7))YY\r"
expect {
	"XX42YY" {}
	timeout { puts "\nEXPECT: no XX42YY"; exit 3 }
	eof { puts "\nEXPECT: srun ended before XX42YY"; exit 3 }
}
send "echo WS\$(stty size)WS\r"
expect {
	"WS33 101WS" {}
	-re {WS[0-9]+ [0-9]+WS} { puts "\nEXPECT: initial window size wrong"; exit 5 }
	timeout { puts "\nEXPECT: no initial window size"; exit 5 }
}
exec python3 -c {import fcntl, os, struct, sys, termios; fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY | os.O_NOCTTY), termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))} $spawn_out(slave,name)
send "k=0; while \[ \"\$(stty size)\" != \"40 120\" \] && \[ \$k -lt 100 \]; do sleep 0.1; k=\$((k+1)); done; echo WZ\$(stty size)WZ\r"
expect {
	"WZ40 120WZ" {}
	-re {WZ[0-9]+ [0-9]+WZ} { puts "\nEXPECT: window size after the resize wrong"; exit 6 }
	timeout { puts "\nEXPECT: no window size after the resize"; exit 6 }
}
send "exit\r"
expect {
	eof {}
	timeout { puts "\nEXPECT: srun did not end after exit"; exit 4 }
}
lassign [wait] pid spawnid oserr status
puts "\nSRUN-EXIT $status"
`, expectStartTime, strings.Join(args, " "), expectStepTimeout)
}

// srunExitRe is what ptyScript prints once srun has ended.
var srunExitRe = regexp.MustCompile(`(?m)^SRUN-EXIT (-?[0-9]+)\r?$`)

// testSrunPty: `srun --pty bash` under expect: bash answers in the terminal, sees
// srun's window size at start and after a resize, `exit` ends it and srun returns 0.
func testSrunPty(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "pty")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		script := ptyScript([]string{"srun", "-p", srunPartition, "-n1", "-w", node(c, 0), "--pty", "bash", "--norc", "--noprofile"})
		return withSlot(c, func() cluster.Result { return c.Expect(t, user, dirs[c], script, ptyTimeout) })
	})
	exits := map[*cluster.Cluster]string{}
	for _, x := range []struct {
		c *cluster.Cluster
		r cluster.Result
	}{{p.ref, ref}, {p.sut, sut}} {
		ended(t, p, x.c, x.r)
		if x.r.ExitCode != 0 || !strings.Contains(x.r.Stdout, "XX42YY") {
			t.Errorf("%s: the expect session failed (exit 2: no prompt, 3: no answer, 4: srun did not end, 5: initial window size, 6: window size after a resize): %v; terminal:\n%s", p.label(x.c), x.r, clipOut(x.r.Stdout))
			continue
		}
		m := srunExitRe.FindStringSubmatch(x.r.Stdout)
		if m == nil {
			t.Errorf("%s: no SRUN-EXIT line: %v", p.label(x.c), x.r)
			continue
		}
		exits[x.c] = m[1]
		if m[1] != "0" {
			t.Errorf("%s: srun --pty exited %s after `exit`, want 0: %v", p.label(x.c), m[1], x.r)
		}
	}
	if exits[p.ref] != exits[p.sut] {
		t.Errorf("srun --pty exit status %q on the reference, %q under test", exits[p.ref], exits[p.sut])
	}
}

// counterMaxTicks bounds the sattach step (0.2 s a line) if the test never stops it.
const counterMaxTicks = 300

// counterCmd prints the job id, then "tick <i>" every 0.2 s until the file "stop"
// exists in its working directory.
var counterCmd = fmt.Sprintf(`echo job $SLURM_JOB_ID; i=0
while [ ! -e stop ] && [ $i -lt %d ]; do echo tick $i; i=$((i+1)); sleep 0.2; done`, counterMaxTicks)

// sattachRun is one cluster's part of testSrunSattach.
type sattachRun struct {
	job      string
	step     cluster.Result // the srun printing the counter
	attach   cluster.Result // sattach <job>.0
	sstat    cluster.Result // sstat -j <job>.0 (from Exec: ExitCode unused)
	attachAt int            // lines srun had printed when sattach started
	err      error
}

// counterLines are the lines of a counter step that printed ticks 0..n-1.
func counterLines(n int) []string {
	l := []string{"job <JOB>"}
	for i := range n {
		l = append(l, fmt.Sprintf("tick %d", i))
	}
	return l
}

// testSrunSattach: while a step prints a counter, `sstat -j <job>.0` answers (no
// error, the same fields as on the stock daemon) and `sattach <job>.0` receives the
// step's output as it is printed, to the end of the step, where sattach exits 0;
// as on the stock daemon (slurmstepd replays what it buffered) it also gets the
// lines printed before it attached.
func testSrunSattach(t *testing.T, p pair) {
	dirs := workDirs(t, p, "root", "sattach")
	ref, sut := onBoth(p, func(c *cluster.Cluster) sattachRun {
		return withSlot(c, func() sattachRun { return sattachOn(t, c, dirs[c]) })
	})
	first := map[*cluster.Cluster]string{}
	sstats := map[*cluster.Cluster]string{}
	for _, x := range []struct {
		c   *cluster.Cluster
		run sattachRun
	}{{p.ref, ref}, {p.sut, sut}} {
		lbl := p.label(x.c)
		if x.run.err != nil {
			t.Fatalf("%s: %v", lbl, x.run.err)
		}
		norm := normalizer(x.c, map[string]string{x.run.job: "<JOB>"})
		ended(t, p, x.c, x.run.step)
		step := strings.Split(strings.TrimSuffix(norm(x.run.step.Stdout), "\n"), "\n")
		if x.run.step.ExitCode != 0 || !slices.Equal(step, counterLines(len(step)-1)) {
			t.Errorf("%s: the counter step: %v", lbl, x.run.step)
		}
		if x.run.sstat.Err != nil || x.run.sstat.Stderr != "" || !strings.Contains(x.run.sstat.Stdout, x.run.job+".0") {
			t.Errorf("%s: sstat while the step ran: want its line and no error: %v", lbl, x.run.sstat)
		}
		sstats[x.c] = norm(x.run.sstat.Stdout)

		ended(t, p, x.c, x.run.attach)
		got := strings.Split(strings.TrimSuffix(norm(x.run.attach.Stdout), "\n"), "\n")
		t.Logf("%s: sattach started after %d of %d lines, received %d", lbl, x.run.attachAt, len(step), len(got))
		if x.run.attach.ExitCode != 0 || x.run.attach.Stderr != "" {
			t.Errorf("%s: sattach: want exit 0 and no error: %v", lbl, x.run.attach)
		}
		// The end of the step's output, with at least one line printed after
		// sattach started (sattachOn waited for one).
		if len(got) > len(step) || !slices.Equal(got, step[len(step)-len(got):]) || len(step)-len(got) >= x.run.attachAt+1 {
			t.Errorf("%s: sattach printed %q;\nwant the end of the step's output %q, including the lines after line %d",
				lbl, got, step, x.run.attachAt)
		}
		first[x.c] = got[0]
	}
	if first[p.ref] != first[p.sut] {
		t.Errorf("sattach's first line %q on the reference, %q under test (stock replays the step's earlier output)", first[p.ref], first[p.sut])
	}
	if sstats[p.ref] != sstats[p.sut] {
		t.Errorf("sstat output differs (normalized):\nreference:\n%s\nunder test:\n%s", sstats[p.ref], sstats[p.sut])
	}
}

// sattachOn runs the counter step; while it runs, sstat and then sattach, which
// must print a tick the step printed after sattach started; then it stops the
// step. It runs in a goroutine of onBoth: errors are returned.
func sattachOn(t *testing.T, c *cluster.Cluster, dir string) sattachRun {
	var run sattachRun
	cl, err := c.StartClient(t, srunCmd("root", dir, bgStepTimeout, "-n1", "-w", node(c, 0), "sh", "-c", counterCmd))
	if err != nil {
		return sattachRun{err: err}
	}
	// Not touch: this runs outside the test goroutine. A failed write leaves the
	// step to its counterMaxTicks bound.
	stopStep := func() { _ = os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644) }
	if !poll(stepRunTimeout, func() bool { return cl.Exited() || strings.Contains(cl.Stdout(), "tick 1\n") }) || cl.Exited() {
		cl.Kill()
		return sattachRun{err: fmt.Errorf("the counter step printed no \"tick 1\" within %v: %v", stepRunTimeout, cl.Wait())}
	}
	m := regexp.MustCompile(`(?m)^job ([0-9]+)$`).FindStringSubmatch(cl.Stdout())
	if m == nil {
		cl.Kill()
		return sattachRun{err: fmt.Errorf("no job id in the counter step's output: %v", cl.Wait())}
	}
	run.job = m[1]
	step := run.job + ".0"

	sstatArgs := []string{"sstat", "-P", "-j", step, "-o", "JobID,NTasks"}
	out, errOut, err := c.Exec(t, cluster.Cmd{Args: sstatArgs, CleanEnv: true})
	run.sstat = cluster.Result{Args: sstatArgs, Stdout: out, Stderr: errOut, Err: err}

	run.attachAt = strings.Count(cl.Stdout(), "\n")
	// "tick <attachAt-1>" is the first line srun had not printed yet.
	live := fmt.Sprintf("tick %d\n", run.attachAt-1)
	at, err := c.StartClient(t, cluster.BgCmd{Cmd: cluster.Cmd{Args: []string{"sattach", step}, CleanEnv: true}, Timeout: srunTimeout})
	if err != nil {
		stopStep()
		cl.Wait()
		return sattachRun{err: err}
	}
	if !poll(stepRunTimeout, func() bool { return at.Exited() || strings.Contains(at.Stdout(), live) }) {
		stopStep()
		at.Kill()
		cl.Wait()
		return sattachRun{err: fmt.Errorf("sattach printed no %q within %v: %v", strings.TrimSpace(live), stepRunTimeout, at.Wait())}
	}
	stopStep()
	run.attach = at.Wait()
	run.step = cl.Wait()
	return run
}

// testSrunPtyTwoTasks: `srun -n2 --pty` on one node. Task 0 gets the terminal; task 1 cannot
// join task 0's process group (task 0 leads its own session) and must still start, as on the
// stock daemon: same output through the terminal and the same exit status.
func testSrunPtyTwoTasks(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "pty2")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		script := fmt.Sprintf(`log_user 1
set timeout %d
spawn srun -p %s -N1 -n2 -w %s --pty sh -c {echo PT$SLURM_PROCID; sleep 1}
expect {
	eof {}
	timeout { puts "\nEXPECT: srun did not end"; exit 4 }
}
lassign [wait] pid spawnid oserr status
puts "\nSRUN-EXIT $status"
`, expectStepTimeout, srunPartition, node(c, 0))
		return withSlot(c, func() cluster.Result { return c.Expect(t, user, dirs[c], script, ptyTimeout) })
	})
	got := map[*cluster.Cluster]string{}
	for _, x := range []struct {
		c *cluster.Cluster
		r cluster.Result
	}{{p.ref, ref}, {p.sut, sut}} {
		m := srunExitRe.FindStringSubmatch(x.r.Stdout)
		if x.r.ExitCode != 0 || m == nil {
			t.Errorf("%s: the expect session failed: %v; terminal:\n%s", p.label(x.c), x.r, clipOut(x.r.Stdout))
			continue
		}
		got[x.c] = fmt.Sprintf("exit %s, PT0 %v, PT1 %v", m[1], strings.Contains(x.r.Stdout, "PT0"), strings.Contains(x.r.Stdout, "PT1"))
	}
	if got[p.ref] != got[p.sut] {
		t.Errorf("srun -n2 --pty: reference %q, under test %q", got[p.ref], got[p.sut])
	}
	t.Logf("srun -n2 --pty: %s", got[p.sut])
}
