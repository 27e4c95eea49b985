//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// What legitimately differs between two runs in the step manager's log lines: pids
// ("task 0 (4647) started", "pid=4697", "pgid 4697") and times (the task's start,
// 26.05's line prefix). Job ids, node names and the cluster directory go through
// srunNormalizer.
var (
	slurmdDebugTime = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3})?`)
	slurmdDebugPID  = regexp.MustCompile(`(\(|pid=|pgid |primary pid )[0-9]+(\)|\b)`)
	// slurmdDebugSack is stock's step manager asking the SACK socket for an
	// auth/slurm token (24.11 on); slurmd-go's signs with slurm.key itself and
	// has no such connection to log.
	slurmdDebugSack = regexp.MustCompile(`debug2: _sack_connect: connected to `)
	// slurmdDebugIOStart is logged by stock's I/O thread, which may run before the
	// log reaches srun (_slurmd_job_log_init runs beside it): under load stock
	// sometimes leaves it out.
	slurmdDebugIOStart = regexp.MustCompile(`debug:  IO handler started pid=`)
)

// wholeLine: a normalized line is one whole log line of a step manager: it starts
// with the line prefix and holds no other.
func wholeLine(l string) bool {
	for _, prefix := range []string{"slurmstepd-<NODE>1: ", "[<TIME>] "} {
		if strings.HasPrefix(l, prefix) {
			return strings.Count(l, prefix) == 1
		}
	}
	return false
}

// slurmdDebugTries bounds the reruns of one level when stock's own lines came out
// torn: its forked task and the step manager write to the same stderr pipe at once.
const slurmdDebugTries = 3

// testSrunSlurmdDebug: `srun --slurmd-debug=<level>` makes the step manager copy its
// own log lines at that level to srun's stderr ("slurmstepd-<node>: <prefix>...";
// 26.05 "[<time>] <prefix>..."), as stock's _slurmd_job_log_init does: the same set
// of lines as stock at info, verbose, debug and debug2. 22.05 takes the value as an
// offset over error; from 24.11 it is the level itself.
func testSrunSlurmdDebug(t *testing.T, p pair) {
	offset := map[string]int{"info": 1, "verbose": 2, "debug": 3, "debug2": 4}
	for _, lvl := range []string{"info", "verbose", "debug", "debug2"} {
		arg := lvl
		if p.ref.ProtocolVersion < slurmproto.Version2411 {
			arg = fmt.Sprint(offset[lvl])
		}
		dirs := workDirs(t, p, "root", "slurmd-debug-"+lvl)
		norm := func(c *cluster.Cluster, s string) []string {
			s = srunNormalizer(c, nil)(s)
			s = slurmdDebugTime.ReplaceAllString(s, "<TIME>")
			return sortedLines(slurmdDebugPID.ReplaceAllString(s, "${1}<PID>${2}"))
		}
		var nr, ns []string
		for try := 1; ; try++ {
			ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
				return srunWith(t, c, "root", dirs[c], "", "-w", node(c, 0), "-n1", "--slurmd-debug="+arg, "true")
			})
			wantExit(t, p, ref, sut, 0)
			nr, ns = norm(p.ref, ref.Stderr), norm(p.sut, sut.Stderr)
			torn := slices.ContainsFunc(nr, func(l string) bool { return !wholeLine(l) })
			if !torn || try == slurmdDebugTries {
				break
			}
			t.Logf("--slurmd-debug=%s: stock's lines came out torn (try %d), running again:\n  %s", arg, try, strings.Join(nr, "\n  "))
		}
		nr = slices.DeleteFunc(nr, func(l string) bool {
			if slurmdDebugSack.MatchString(l) {
				t.Logf("--slurmd-debug=%s: not compared: %q", arg, l)
				return true
			}
			return false
		})
		isIOStart := func(l string) bool { return slurmdDebugIOStart.MatchString(l) }
		if slices.ContainsFunc(nr, isIOStart) != slices.ContainsFunc(ns, isIOStart) {
			t.Logf("--slurmd-debug=%s: stock's racy %q line on one side only, not compared", arg, "IO handler started")
			nr, ns = slices.DeleteFunc(nr, isIOStart), slices.DeleteFunc(ns, isIOStart)
		}
		if lvl != "info" && len(nr) == 0 {
			t.Errorf("--slurmd-debug=%s: the stock step manager wrote nothing to srun's stderr", arg)
		}
		if strings.Join(nr, "\n") != strings.Join(ns, "\n") {
			t.Errorf("--slurmd-debug=%s: stderr differs (sorted, normalized):\nreference:\n  %s\nunder test:\n  %s",
				arg, strings.Join(nr, "\n  "), strings.Join(ns, "\n  "))
		}
	}
}
