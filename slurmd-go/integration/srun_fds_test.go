//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// fdLister prints one line per open descriptor of the process it lists: number,
// mode (the open flags, as /proc shows them) and target. Run as the task itself it
// lists its own descriptors plus find's own three (its working directory and two of
// /proc/self/fd), the same on both clusters.
const findOwnFDs = 3

var fdLister = []string{"find", "/proc/self/fd", "-mindepth", "1", "-printf", `%f %M %l\n`}

// fdListerOf is fdLister for the shell that runs it ($$): a script's own
// descriptors, without find's.
const fdListerOf = `find /proc/$$/fd -mindepth 1 -printf '%f %M %l\n'`

var (
	fdPIDRe   = regexp.MustCompile(`/proc/[0-9]+/`)
	fdInodeRe = regexp.MustCompile(`\b(pipe|socket|anon_inode):\[([0-9a-z_]+)\]`)
	fdPtsRe   = regexp.MustCompile(`/dev/pts/[0-9]+`)
	fdJobRe   = regexp.MustCompile(`job[0-9]{5,}`)
)

// normalizeFDs makes two descriptor listings of one cluster comparable with the
// other's: pids, pipe and socket inodes (numbered in order of appearance, so that
// two descriptors of one pipe still show as one), pty numbers, job directories,
// then srunNormalizer (cluster directory, node names, job ids).
func normalizeFDs(c *cluster.Cluster, s string) string {
	s = fdPIDRe.ReplaceAllString(s, "/proc/<PID>/")
	s = fdPtsRe.ReplaceAllString(s, "/dev/pts/<N>")
	s = fdJobRe.ReplaceAllString(s, "job<ID>")
	seen := map[string]string{}
	s = fdInodeRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := fdInodeRe.FindStringSubmatch(m)
		if sub[1] == "anon_inode" {
			return m // [eventpoll], [eventfd]: names, not numbers
		}
		key := sub[1] + sub[2]
		if _, ok := seen[key]; !ok {
			seen[key] = fmt.Sprintf("#%d", len(seen)+1)
		}
		return sub[1] + ":[" + seen[key] + "]"
	})
	return srunNormalizer(c, nil)(s)
}

// sameFDs checks that a listing is the same on both clusters (normalized) and holds
// nothing but fds 0-2 and what the lister itself opens (extra).
func sameFDs(t *testing.T, p pair, what, ref, sut string, extra int) {
	t.Helper()
	nr, ns := normalizeFDs(p.ref, ref), normalizeFDs(p.sut, sut)
	if nr != ns {
		t.Errorf("%s: descriptors differ (normalized):\nreference:\n%s\nunder test:\n%s", what, nr, ns)
	}
	for _, l := range []struct{ label, text string }{{p.label(p.ref), nr}, {p.label(p.sut), ns}} {
		lines := strings.Split(strings.TrimSpace(l.text), "\n")
		if len(lines) != 3+extra {
			t.Errorf("%s on %s: %d descriptors, want fds 0-2 and %d of the lister's:\n%s", what, l.label, len(lines), extra, l.text)
		}
	}
}

// testSrunDescriptors: a task holds exactly the descriptors a stock task holds, in
// an interactive srun (with its --task-prolog and --task-epilog) and in a batch job
// (the script, and an srun step inside it): fds 0-2, with the same kind of target
// and open mode, nothing leaked from the daemon or the step manager.
func testSrunDescriptors(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "fds")
	for _, c := range p.both() {
		d := dirs[c]
		for _, s := range []string{"prolog", "epilog"} {
			writeScript(t, filepath.Join(d, "t"+s+".sh"), user, "#!/bin/sh\n"+fdListerOf+" > fds-"+s+".txt\n")
		}
	}
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		d := dirs[c]
		args := append([]string{"-n1", "-w", node(c, 0),
			"--task-prolog=" + filepath.Join(d, "tprolog.sh"), "--task-epilog=" + filepath.Join(d, "tepilog.sh")}, fdLister...)
		return srunWith(t, c, user, d, "", args...)
	})
	wantExit(t, p, ref, sut, 0)
	sameFDs(t, p, "interactive srun task", sortFDLines(ref.Stdout), sortFDLines(sut.Stdout), findOwnFDs)
	for _, s := range []string{"prolog", "epilog"} {
		var got [2]string
		for i, c := range []*cluster.Cluster{p.ref, p.sut} {
			b, err := os.ReadFile(filepath.Join(dirs[c], "fds-"+s+".txt"))
			if err != nil {
				t.Fatalf("%s: the task %s wrote no listing: %v", p.label(c), s, err)
			}
			got[i] = string(b)
		}
		// The shell holds its script open: one descriptor more on both.
		compareFDs(t, p, "--task-"+s, sortFDLines(got[0]), sortFDLines(got[1]))
	}

	script := "#!/bin/sh\necho '== batch'\n" + fdListerOf + "\necho '== step'\nsrun -n1 " +
		strings.Join(quoteAll(fdLister), " ") + "\necho '== end'\n"
	jr, js := submitBoth(t, p, user, script, func(c *cluster.Cluster) []string {
		// One node: the script's own descriptor names the node's spool directory.
		return []string{"-p", srunPartition, "-N1", "-n1", "-w", node(c, 0), "-o", "out"}
	}, "srun", "fds-batch")
	var text [2]string
	for i, j := range []jobOf{jr, js} {
		f := j.c.WaitJob(t, j.id, srunJobTimeout, cluster.JobTerminalStates...)
		text[i], _ = readJobFile(t, filepath.Join(j.dir, "out"))
		if f["JobState"] != "COMPLETED" || f["ExitCode"] != "0:0" {
			t.Errorf("%s: job %s %s ExitCode=%s, want COMPLETED 0:0; output:\n%s", p.label(j.c), j.id, f["JobState"], f["ExitCode"], text[i])
		}
	}
	rb, rs := splitSections(text[0])
	sb, ss := splitSections(text[1])
	compareFDs(t, p, "batch script", sortFDLines(rb), sortFDLines(sb))
	sameFDs(t, p, "srun step in a batch job", sortFDLines(rs), sortFDLines(ss), findOwnFDs)
}

// compareFDs checks that a script's listing is the same on both clusters.
func compareFDs(t *testing.T, p pair, what, ref, sut string) {
	t.Helper()
	if nr, ns := normalizeFDs(p.ref, ref), normalizeFDs(p.sut, sut); nr != ns {
		t.Errorf("%s: descriptors differ (normalized):\nreference:\n%s\nunder test:\n%s", what, nr, ns)
	}
}

// splitSections cuts a batch job's output into its "== batch" and "== step" parts.
func splitSections(out string) (batch, step string) {
	_, rest, _ := strings.Cut(out, "== batch\n")
	batch, rest, _ = strings.Cut(rest, "== step\n")
	step, _, _ = strings.Cut(rest, "== end\n")
	return batch, step
}

// sortFDLines sorts a listing by descriptor number.
func sortFDLines(s string) string {
	lines := sortedLines(s)
	num := func(l string) int {
		n := 0
		fmt.Sscan(l, &n)
		return n
	}
	for i := 1; i < len(lines); i++ {
		for k := i; k > 0 && num(lines[k]) < num(lines[k-1]); k-- {
			lines[k], lines[k-1] = lines[k-1], lines[k]
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}

// taskEpilogBound is how long slurmstepd lets srun's --task-epilog run (mgr.c
// _run_script_as_user, max_wait 5).
const taskEpilogBound = 5 * time.Second

// testSrunTaskEpilogBound: srun's --task-epilog that outlives stock's 5-second
// bound is killed with its process group (it never writes its second file) and
// reported as stock reports it ("TaskEpilog failed status=9").
func testSrunTaskEpilogBound(t *testing.T, p pair) {
	const user = "root"
	dirs := workDirs(t, p, user, "epilogbound")
	for _, c := range p.both() {
		writeScript(t, filepath.Join(dirs[c], "te.sh"), user,
			"#!/bin/sh\ntouch te-started\nsleep 60\ntouch te-survived\n")
	}
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		d := dirs[c]
		return srunWith(t, c, user, d, "", "-n1", "-w", node(c, 0), "--task-epilog="+filepath.Join(d, "te.sh"), "true")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{})
	for _, x := range []struct {
		c *cluster.Cluster
		r cluster.Result
	}{{p.ref, ref}, {p.sut, sut}} {
		lines := dropSrunRaces(t, p.label(x.c), sortedLines(srunNormalizer(x.c, nil)(x.r.Stderr)))
		re := stepdLineRe(factsOf(t, x.c), node(x.c, 0), "TaskEpilog failed status=9")
		if len(lines) != 1 || !re.MatchString(x.r.Stderr) {
			t.Errorf("%s: stderr %q, want one line matching %s", p.label(x.c), lines, re)
		}
		if _, err := os.Stat(filepath.Join(dirs[x.c], "te-started")); err != nil {
			t.Errorf("%s: the task epilog never ran: %v", p.label(x.c), err)
		}
		if _, err := os.Stat(filepath.Join(dirs[x.c], "te-survived")); err == nil {
			t.Errorf("%s: the task epilog ran past its bound", p.label(x.c))
		}
		if x.r.Elapsed < taskEpilogBound {
			t.Errorf("%s: srun took %v, less than the %v the task epilog is given", p.label(x.c), x.r.Elapsed, taskEpilogBound)
		}
	}
}

// tmpFSOptions is opts with TmpFS=<dir>/%n, each node's directory on another file
// system than its neighbour's (odd nodes on /tmp's, even ones on /dev/shm's), and
// TmpDisk=1 on every node: a node that measured TmpDisk anywhere but on its own
// expanded TmpFS (an unexpanded "%n" path does not exist: 0 MiB) is INVALID ("Low
// TmpDisk") and the cluster never starts.
func tmpFSOptions(t *testing.T, opts func(impl string) cluster.Options) func(impl string) cluster.Options {
	root := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "ti-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	return func(impl string) cluster.Options {
		o := opts(impl)
		n := o.Nodes
		if n == 0 {
			n = 4
		}
		for i := 1; i <= n; i++ {
			dir := filepath.Join(root, fmt.Sprintf("%s%d", o.NodePrefix, i))
			if i%2 == 0 {
				target := filepath.Join(shm, filepath.Base(dir))
				if err := os.Mkdir(target, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, dir); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		o.ExtraConf = append(o.ExtraConf, "TmpFS="+root+"/%n")
		o.NodeExtra = strings.TrimSpace(o.NodeExtra + " TmpDisk=1")
		return o
	}
}

// testTmpFSPerNode: each node measures the size of the file system of its own TmpFS
// directory (statvfs, MiB; `scontrol show slurmd`), as the stock slurmd does, and
// none is INVALID.
func testTmpFSPerNode(t *testing.T, p pair) {
	for _, c := range p.both() {
		tmpfs := ""
		for _, l := range strings.Split(readConf(t, c), "\n") {
			if v, ok := strings.CutPrefix(l, "TmpFS="); ok {
				tmpfs = v
			}
		}
		if tmpfs == "" {
			t.Fatalf("%s: no TmpFS in slurm.conf", p.label(c))
		}
		sizes := map[string]bool{}
		for _, n := range c.NodeNames() {
			dir := strings.Replace(tmpfs, "%n", n, 1)
			var st syscall.Statfs_t
			if err := syscall.Statfs(dir, &st); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%d MB", uint64(st.Blocks)*uint64(st.Frsize)/(1<<20))
			// The measured value is the daemon's (scontrol show node has slurm.conf's).
			if got := c.ShowSlurmd(t, "", n)["Actual temp disk space"]; got != want {
				t.Errorf("%s: node %s measures TmpDisk %s, want %s (statvfs of %s)", p.label(c), n, got, want, dir)
			}
			f := c.ShowNode(t, n)
			if strings.Contains(f["State"], "INVALID") || f["Reason"] != "" {
				t.Errorf("%s: node %s State=%s Reason=%q", p.label(c), n, f["State"], f["Reason"])
			}
			sizes[want] = true
		}
		if len(sizes) < 2 {
			t.Errorf("%s: every node's TmpFS is on one file system (%v): the test cannot tell them apart", p.label(c), sizes)
		}
	}
}

// readConf is c's slurm.conf.
func readConf(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	b, err := os.ReadFile(c.ConfPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
