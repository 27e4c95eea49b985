//go:build integration

package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// srunTimeLimitTimeout bounds `srun --time=1`: slurmctld checks time limits every 30 s, so the
// step ends 60-90 s after it starts, then KillWait.
const srunTimeLimitTimeout = 3 * time.Minute

// stepTimeLimitRe is the line the step manager sends to srun's stderr when slurmctld kills the
// step at its job's time limit (slurmstepd's REQUEST_KILL_TIMELIMIT handling).
// The whole line, with the job id, node and time replaced, must be the same on both daemons.
var stepTimeLimitRe = regexp.MustCompile(`(?m)^(.*)\*\*\* STEP ([0-9]+)\.0 ON (\S+) CANCELLED AT \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d DUE TO TIME LIMIT \*\*\*\r?$`)

// testSrunTimeLimit: `srun --time=1 sleep 300` makes its own one-minute job. At the limit
// slurmctld kills the step: srun prints the step manager's "*** STEP <job>.0 ON <node>
// CANCELLED AT <time> DUE TO TIME LIMIT ***" line and exits with the same code as on the
// stock daemon, and the job ends TIMEOUT on both.
func testSrunTimeLimit(t *testing.T, p pair) {
	dirs := workDirs(t, p, "root", "timelimit")
	ref, sut := onBoth(p, func(c *cluster.Cluster) cluster.Result {
		bc := srunCmd("root", dirs[c], srunTimeLimitTimeout, "-n1", "-w", node(c, 0), "--time=1", "sleep", "300")
		return withSlot(c, func() cluster.Result { return c.RunClient(t, bc) })
	})
	states, prefixes := map[*cluster.Cluster]string{}, map[*cluster.Cluster]string{}
	for _, x := range []struct {
		c *cluster.Cluster
		r cluster.Result
	}{{p.ref, ref}, {p.sut, sut}} {
		m := stepTimeLimitRe.FindStringSubmatch(x.r.Stderr)
		if m == nil {
			t.Errorf("%s: no time-limit line from the step manager in srun's stderr: %v", p.label(x.c), x.r)
			continue
		}
		if m[3] != node(x.c, 0) {
			t.Errorf("%s: time-limit line names node %s, want %s", p.label(x.c), m[3], node(x.c, 0))
		}
		prefixes[x.c] = slurmTimeRe.ReplaceAllString(strings.ReplaceAll(m[1], node(x.c, 0), "<NODE>"), "<TIME>")
		f := x.c.WaitJob(t, m[2], shortJobTimeout, cluster.JobTerminalStates...)
		states[x.c] = f["JobState"]
	}
	if prefixes[p.ref] != prefixes[p.sut] {
		t.Errorf("time-limit line starts %q on the reference, %q under test", prefixes[p.ref], prefixes[p.sut])
	}
	if ref.ExitCode != sut.ExitCode {
		t.Errorf("srun exit code %d on the reference, %d under test", ref.ExitCode, sut.ExitCode)
	}
	if states[p.ref] != "TIMEOUT" || states[p.sut] != "TIMEOUT" {
		t.Errorf("job states %q (reference) and %q (under test), want TIMEOUT", states[p.ref], states[p.sut])
	}
	t.Logf("srun --time=1: exit %d on both", sut.ExitCode)
}
