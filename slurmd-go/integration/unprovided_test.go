//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
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

// TestAffinity_Unprovided (issue 11, part 11; a limit of RFC 4): slurmd-go has no
// task/affinity. Under TaskPlugin=task/affinity, where stock would bind, an srun with
// --cpu-bind or --mem-bind runs unbound and says so on its stderr, one line per node,
// and the node daemon said at start that it has no task/affinity; without a binding
// asked, nothing is said. slurmd-go's own behaviour (the cluster is slurmd-go's);
// as the ordinary user.
func TestAffinity_Unprovided(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Impl: cluster.ImplGo, Nodes: 2, ExtraConf: []string{"TaskPlugin=task/affinity"}})
	srun := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, err := c.Exec(t, cluster.Cmd{User: cluster.TestUser, Args: append([]string{"srun", "-N2", "-n2"}, args...)})
		if err != nil {
			t.Fatalf("srun %v: %v (stderr %q)", args, err, errOut)
		}
		return out, errOut
	}
	for _, tc := range []struct{ opt, want string }{
		{"--cpu-bind=cores", "--cpu-bind is not applied"},
		{"--mem-bind=local", "--mem-bind is not applied"},
	} {
		out, errOut := srun(tc.opt, "echo", "ran")
		if out != "ran\nran\n" {
			t.Errorf("srun %s: stdout %q, want both tasks to run", tc.opt, out)
		}
		// One line per node: "slurmstepd-<node>: error: ..." before 26.05, a
		// timestamp instead of the name from 26.05, as each release's stock lines.
		line := "error: task/affinity is not provided by slurmd-go: " + tc.want
		if n := strings.Count(errOut, line); n != len(c.Nodes) {
			t.Errorf("srun %s: stderr %q has %d lines %q, want one per node", tc.opt, errOut, n, line)
		}
		if c.ProtocolVersion < slurmproto.Version2605 {
			for _, n := range c.NodeNames() {
				if !strings.Contains(errOut, "slurmstepd-"+n+": "+line) {
					t.Errorf("srun %s: stderr %q lacks node %s's line", tc.opt, errOut, n)
				}
			}
		}
	}
	if _, errOut := srun("echo", "ran"); strings.Contains(errOut, "not provided") {
		t.Errorf("srun without binding: stderr %q", errOut)
	}
	if log := readFileQuiet(c.NodeLog(c.Nodes[0].Name)); !strings.Contains(log, "slurmd-go has no task/affinity") {
		t.Errorf("%s's log does not say it has no task/affinity", c.Nodes[0].Name)
	}
}
