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

// TestContainer_Refused (issue 11, part 11; a compatibility limit of RFC 4): slurmd-go
// runs no OCI containers. Without oci.conf a --container is ignored, as stock ignores
// it then ("containers are not configured on this node"): the job runs. Once oci.conf
// sits beside slurm.conf, where stock would run the job in the container runtime,
// slurmd-go refuses it with a clear error instead of running it outside: a batch job
// ends FAILED with the reason in its stderr file, an srun step fails with "Container
// support is not configured" (ESLURM_CONTAINER_NOT_CONFIGURED), and the node log names
// the container. This is slurmd-go's own behaviour, so the cluster is slurmd-go's
// whatever TIEE_SLURMD_IMPL says; as the ordinary user.
func TestContainer_Refused(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 1})
	user := cluster.TestUser
	dir := c.WorkDir(t, user, "container")
	bundle := filepath.Join(dir, "bundle")

	ran := c.SbatchIn(t, user, dir, "#!/bin/sh\necho ran\n", "--container="+bundle, "-o", "ignored.out")
	f := c.WaitJob(t, ran, shortJobTimeout, cluster.JobTerminalStates...)
	if f["JobState"] != "COMPLETED" {
		t.Fatalf("--container without oci.conf: job %s %s, want COMPLETED (ignored, as stock)", ran, f["JobState"])
	}
	if out, _ := readJobFile(t, filepath.Join(dir, "ignored.out")); out != "ran\n" {
		t.Fatalf("--container without oci.conf: output %q, want \"ran\\n\"", out)
	}

	oci := filepath.Join(filepath.Dir(c.ConfPath), "oci.conf")
	if err := os.WriteFile(oci, []byte("RunTimeRun=\"runc --rootless=true run %n.%u.%j.%s.%t -b %b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := c.NodeLog(c.Nodes[0].Name)
	off := len(readFileQuiet(log))

	id := c.SbatchIn(t, user, dir, "#!/bin/sh\necho ran\n", "--container="+bundle, "-o", "refused.out", "-e", "refused.err")
	f = c.WaitJob(t, id, shortJobTimeout, cluster.JobTerminalStates...)
	if f["JobState"] != "FAILED" {
		t.Errorf("--container with oci.conf: batch job %s %s, want FAILED", id, f["JobState"])
	}
	if errText, _ := readJobFile(t, filepath.Join(dir, "refused.err")); !strings.Contains(errText, "slurmd-go does not run OCI containers") {
		t.Errorf("--container with oci.conf: the job's stderr %q does not say why", errText)
	}
	if out, _ := readJobFile(t, filepath.Join(dir, "refused.out")); strings.Contains(out, "ran") {
		t.Errorf("--container with oci.conf: the script ran outside the container: %q", out)
	}

	out, errOut, err := c.Exec(t, cluster.Cmd{User: user, Dir: dir, Args: []string{"srun", "--container=" + bundle, "echo", "ran"}})
	if err == nil || strings.Contains(out, "ran") {
		t.Errorf("srun --container with oci.conf: err=%v stdout %q, want a failed step that did not run", err, out)
	}
	if !strings.Contains(errOut, "Container support is not configured") {
		t.Errorf("srun --container with oci.conf: stderr %q lacks ESLURM_CONTAINER_NOT_CONFIGURED's message", errOut)
	}
	c.WaitFor(t, "the node to log both refusals", rawReplyTimeout, func() (bool, string) {
		n := strings.Count(readFileQuiet(log)[off:], "OCI container requested")
		return n >= 2, fmt.Sprintf("node log has the refusal line %d times", n)
	})
}
