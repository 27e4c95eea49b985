//go:build integration

package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// stepmgrSrunBound is how long srun may wait after its job was cancelled.
const stepmgrSrunBound = 15 * time.Second

// TestStepmgr_Refused (issue 11, part 11; a compatibility limit of RFC 4): with
// SlurmctldParameters=enable_stepmgr (24.11 on) slurmctld hands a job's step
// management to the extern step of its first node, which slurmd-go does not serve.
// Its steps would wait for ever; instead the first node cancels the job with the
// reason: srun prints it and the job ends CANCELLED, a batch job ends CANCELLED with the reason in its stderr file, the nodes stay idle (no
// Prolog failure, no drain), and the daemon said at start that it does not serve it.
// slurmd-go's own behaviour, so the cluster is slurmd-go's whatever TIEE_SLURMD_IMPL
// says; 22.05 has no step manager, so its runs take 24.11.
func TestStepmgr_Refused(t *testing.T) {
	rel, err := cluster.SelectedRelease()
	if err != nil {
		t.Fatal(err)
	}
	opts := cluster.Options{Impl: cluster.ImplGo, Nodes: 2, ExtraConf: []string{"SlurmctldParameters=enable_stepmgr", "PrologFlags=Contain"}}
	if rel.Name == "22.05" {
		opts.Release = "24.11"
	}
	c := cluster.Start(t, opts)
	const reason = "does not serve step management (--stepmgr, SlurmctldParameters=enable_stepmgr): job cancelled"
	first := c.Nodes[0].Name

	// srun learns the reason at once (REQUEST_JOB_NOTIFY reaches it), and the
	// job is cancelled. Whether srun then exits by itself depends on when the
	// cancellation meets its wait for the allocation: before, it says "has been
	// revoked"; after, slurmctld sends the SRUN_JOB_COMPLETE that would end it to
	// the step manager node, which slurmd-go cannot relay (RFC 4), so srun waits
	// on: timeout ends it here.
	out, errOut, err := c.Exec(t, cluster.Cmd{User: cluster.TestUser, Args: []string{"timeout", "-s", "KILL", strconv.Itoa(int(stepmgrSrunBound / time.Second)), "srun", "-J", "stepmgr-srun", "-N2", "hostname"}})
	if err == nil || out != "" {
		t.Errorf("srun under enable_stepmgr: err=%v stdout %q, want a failed srun that ran nothing", err, out)
	}
	if want := "srun: slurmd-go on node " + first + " " + reason; !strings.Contains(errOut, want) {
		t.Errorf("srun's stderr %q lacks %q", errOut, want)
	}
	ids, _, err := c.Exec(t, cluster.Cmd{Args: []string{"squeue", "-h", "-t", "all", "-n", "stepmgr-srun", "-o", "%i"}})
	if ids = strings.TrimSpace(ids); err != nil || ids == "" || strings.Contains(ids, "\n") {
		t.Fatalf("srun's job: squeue %q, %v", ids, err)
	}
	if f := c.WaitJob(t, ids, shortJobTimeout, cluster.JobTerminalStates...); f["JobState"] != "CANCELLED" {
		t.Errorf("srun's job %s %s, want CANCELLED", ids, f["JobState"])
	}

	dir := c.WorkDir(t, cluster.TestUser, "stepmgr")
	id := c.SbatchIn(t, cluster.TestUser, dir, "#!/bin/sh\nsrun hostname\n", "-N2", "-o", "out", "-e", "err")
	if f := c.WaitJob(t, id, shortJobTimeout, cluster.JobTerminalStates...); f["JobState"] != "CANCELLED" {
		t.Errorf("batch job %s %s, want CANCELLED", id, f["JobState"])
	}
	c.WaitFor(t, "the batch job's stderr to say why", fileTimeout, func() (bool, string) {
		text, _ := readJobFile(t, filepath.Join(dir, "err"))
		return strings.Contains(text, "slurmd-go: error: slurmd-go on node "+first+" "+reason), "stderr: " + text
	})
	c.WaitNodes(t, "idle", c.NodeNames(), nodeIdleTimeout)
	log := readFileQuiet(c.NodeLog(first))
	for _, want := range []string{"SlurmctldParameters=enable_stepmgr: slurmd-go does not serve step management", "job asks for step management on this node"} {
		if !strings.Contains(log, want) {
			t.Errorf("%s's log lacks %q", first, want)
		}
	}
}
