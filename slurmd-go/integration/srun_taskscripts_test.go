//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// testSrunTaskScripts: srun's --task-prolog runs before each task with the
// task's environment, its "export" lines reach the task and its "print" lines
// the task's stdout; --task-epilog runs after each task with SLURM_SCRIPT_CONTEXT
// epilog_task, before srun returns. Same output as on the stock daemon.
func testSrunTaskScripts(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "taskscripts")
	for _, c := range p.both() {
		d := dirs[c]
		writeScript(t, filepath.Join(d, "tp.sh"), user,
			"#!/bin/sh\necho export TP_VAR=from-prolog-$SLURM_PROCID\necho print printed-by-prolog-$SLURM_PROCID\n")
		writeScript(t, filepath.Join(d, "te.sh"), user,
			"#!/bin/sh\necho \"$SLURM_SCRIPT_CONTEXT $SLURM_PROCID $(id -un)\" > epi-$SLURM_PROCID.txt\n")
	}
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		d := dirs[c]
		return srunWith(t, c, user, d, "", "-N2", "-n2", "--label",
			"--task-prolog="+filepath.Join(d, "tp.sh"), "--task-epilog="+filepath.Join(d, "te.sh"),
			"sh", "-c", "echo var=$TP_VAR")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{
		"0: printed-by-prolog-0", "0: var=from-prolog-0",
		"1: printed-by-prolog-1", "1: var=from-prolog-1",
	})
	sameLines(t, p, "stderr", ref.Stderr, sut.Stderr, []string{})
	for _, c := range p.both() {
		for i, want := range []string{"epilog_task 0 " + user, "epilog_task 1 " + user} {
			b, err := os.ReadFile(filepath.Join(dirs[c], "epi-"+string(rune('0'+i))+".txt"))
			if got := strings.TrimSpace(string(b)); err != nil || got != want {
				t.Errorf("%s: task %d epilog wrote %q (%v), want %q", p.label(c), i, got, err, want)
			}
		}
	}
}

// writeScript writes an executable script owned by user.
func writeScript(t *testing.T, path, user, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	uid, gid, err := cluster.LookupUser(user)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// testSrunMultiProg: --multi-prog gives each task its line of the
// configuration, with %t and %o, as on the stock daemon.
func testSrunMultiProg(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "multiprog")
	conf := "# tasks\n0 echo zero %t\n1-3 echo rest %t %o 'quoted %t'\n"
	for _, c := range p.both() {
		if err := os.WriteFile(filepath.Join(dirs[c], "mp.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-N2", "-n4", "--label", "--multi-prog", "mp.conf")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, []string{
		"0: zero 0", "1: rest 1 0 quoted %t", "2: rest 2 1 quoted %t", "3: rest 3 2 quoted %t",
	})
}

// testSrunLabelledFiles: with --label and a per-node output pattern, each
// node's file holds its tasks' labelled lines, as on the stock daemon.
func testSrunLabelledFiles(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "labelfiles")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-N2", "-n4", "--label", "-o", "out-%n.txt", "sh", "-c", "echo out $SLURM_PROCID")
	})
	wantExit(t, p, ref, sut, 0)
	want := map[string][]string{"0": {"0: out 0", "1: out 1"}, "1": {"2: out 2", "3: out 3"}}
	for _, n := range []string{"0", "1"} {
		var got [2]string
		for i, c := range []*cluster.Cluster{p.ref, p.sut} {
			b, err := os.ReadFile(filepath.Join(dirs[c], "out-"+n+".txt"))
			if err != nil {
				t.Fatalf("%s: %v", p.label(c), err)
			}
			got[i] = string(b)
		}
		sameLines(t, p, "out-"+n+".txt", got[0], got[1], want[n])
	}
}

// testSrunFilePatterns: srun's output file patterns as the step manager expands them.
// -o out-%t-%N.txt gives one file per task named after its task id and host; -o 1 (a bare
// task number) sends only task 1's output to srun's stdout and drops the others'. Same
// files and lines as on the stock daemon.
func testSrunFilePatterns(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "filepatterns")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-N2", "-n4", "-w", node(c, 0)+","+node(c, 1), "-o", "out-%t-%N.txt", "sh", "-c", "echo task $SLURM_PROCID")
	})
	wantExit(t, p, ref, sut, 0)
	// %N: the host's short name (every node of the harness runs here) or, in 26.05,
	// the task's node (patternHost); tasks 0-1 run on the first node, 2-3 on the second.
	for task := range 4 {
		var got [2]string
		for i, c := range []*cluster.Cluster{p.ref, p.sut} {
			name := fmt.Sprintf("out-%d-%s.txt", task, patternHost(t, factsOf(t, c), node(c, task/2)))
			b, err := os.ReadFile(filepath.Join(dirs[c], name))
			if err != nil {
				t.Fatalf("%s: task %d's file: %v", p.label(c), task, err)
			}
			got[i] = string(b)
		}
		sameLines(t, p, fmt.Sprintf("task %d's file", task), got[0], got[1], []string{fmt.Sprintf("task %d", task)})
	}
	ref, sut = onBoth(p, func(c *cluster.Cluster) cluster.Result {
		// Task 0 alone on one node, tasks 1 and 2 on the other: CI once placed them so.
		nodes := node(c, 0) + "," + node(c, 1) + "," + node(c, 1)
		return srunWith(t, c, user, dirs[c], "", "-n3", "-m", "arbitrary", "-w", nodes, "-o", "1", "sh", "-c", "echo only $SLURM_PROCID")
	})
	wantExit(t, p, ref, sut, 0)
	sameLines(t, p, "stdout of -o 1", ref.Stdout, sut.Stdout, []string{"only 1"})
}

// testSrunLeaderExitsFirst: every task joins the first task's process group, so that group
// must not be gone (every earlier task exited) before the last task is forked. 24 tasks that
// exit at once (overcommitted on one node) all run and srun exits 0, as on the stock daemon.
func testSrunLeaderExitsFirst(t *testing.T, p pair, user string) {
	dirs := workDirs(t, p, user, "leaderexits")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		return srunWith(t, c, user, dirs[c], "", "-N1", "-n24", "-O", "-w", node(c, 0), "sh", "-c", "echo ran $SLURM_PROCID")
	})
	wantExit(t, p, ref, sut, 0)
	var want []string
	for i := range 24 {
		want = append(want, fmt.Sprintf("ran %d", i))
	}
	sameLines(t, p, "stdout", ref.Stdout, sut.Stdout, want)
}
