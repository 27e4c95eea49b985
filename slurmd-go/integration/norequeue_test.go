//go:build integration

// A failed batch launch that slurmctld may not requeue (issue 11, part 11):
// without PrologFlags=Alloc the Prolog runs at the batch launch; when it fails the
// node asks slurmctld to requeue the job (REQUEST_JOB_REQUEUE), which refuses one
// submitted with --no-requeue (ESLURM_DISABLED). Stock then tells the job of the
// prolog failure (REQUEST_JOB_NOTIFY) and cancels it (REQUEST_KILL_JOB): the job
// ends instead of staying allocated to a node that runs nothing. Compared with the
// stock slurmd of the same release: the job's final state, exit code and reason,
// and the node's state and reason.
package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// noRequeueTimeout bounds the job's end and the node's drain.
const noRequeueTimeout = 2 * time.Minute

func TestLaunchFailed_NoRequeue(t *testing.T) {
	p := startPair(t, func(impl string) cluster.Options {
		return cluster.Options{Impl: impl, Nodes: 1, NodePrefix: cluster.RandomNodePrefix(),
			Prolog: "#!/bin/sh\nexit 1\n", ExtraConf: []string{"MinJobAge=600"}}
	})
	ref, sut := onBoth(p, func(c *cluster.Cluster) map[string]string {
		id := c.Sbatch(t, "root", "#!/bin/sh\necho ran\n", "--no-requeue", "-N1")
		var f map[string]string
		c.WaitFor(t, "job "+id+" to end after its failed prolog", noRequeueTimeout, func() (bool, string) {
			f = c.ShowJob(t, id)
			switch f["JobState"] {
			case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED":
				return false, f["JobState"] + " " + f["Reason"]
			}
			return true, ""
		})
		n := node(c, 0)
		c.WaitNodes(t, "drained", []string{n}, noRequeueTimeout)
		nf := c.ShowNode(t, n)
		// The reason ends with " [root@<time>]".
		reason, _, _ := strings.Cut(nf["Reason"], " [")
		f["NodeState"], f["NodeReason"] = nf["State"], reason
		return f
	})
	keys := []string{"JobState", "ExitCode", "Reason", "Restarts", "NodeState", "NodeReason"}
	for _, k := range keys {
		t.Logf("%s: reference %q, under test %q", k, ref[k], sut[k])
	}
	sameFields(t, "job refused a requeue after its failed prolog", ref, sut, nil, keys...)
}
