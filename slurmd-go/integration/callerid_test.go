//go:build integration

// REQUEST_NETWORK_CALLERID (issue 11, part 11): pam_slurm_adopt asks the node an
// ssh connection came from which job holds that connection when the user has
// several jobs on the login node; `scontrol callerid` sends the same request.
// A root batch job's python process connects to its own listener; then, with the
// real scontrol of the cluster's release:
//   - root asks for that connection: "<job> <node>" (the node holds it);
//   - the ordinary user asks for it: the job is not named ("remote job id
//     indeterminate", exit 1) and the node logs the security violation;
//   - root asks for a connection nobody holds: indeterminate.
//
// scontrol sends the request to the global SlurmdPort of the connection's source
// address; every node here shares 127.0.0.1, so scontrol reads a copy of slurm.conf
// whose SlurmdPort is the first node's Port. Each answer is compared with the stock
// slurmd's of the same release in the same run.
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// callerIDTimeout bounds the job's start and its connection on a loaded machine.
const callerIDTimeout = 90 * time.Second

// callerIDScript connects to its own listener and writes "<its port> <the
// listener's port>" to the file conn, then holds the connection.
const callerIDScript = `#!/bin/sh
exec python3 -c '
import os, socket, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
open("conn.tmp", "w").write("%d %d" % (c.getsockname()[1], l.getsockname()[1]))
os.rename("conn.tmp", "conn")
time.sleep(600)
'
`

// callerIDRun is one cluster's answers: what scontrol printed (normalized) and
// whether the node logged the violation.
type callerIDRun struct {
	answers   []string
	violation bool
}

var slurmdPortRe = regexp.MustCompile(`(?m)^SlurmdPort=\d+$`)

func TestCallerID(t *testing.T) {
	p := startPair(t, func(impl string) cluster.Options { return cluster.Options{Impl: impl, Nodes: 2} })
	ref, sut := onBoth(p, func(c *cluster.Cluster) callerIDRun { return callerIDOn(t, c) })
	for _, x := range []struct {
		c *cluster.Cluster
		r callerIDRun
	}{{p.ref, ref}, {p.sut, sut}} {
		t.Logf("%s: %q, violation logged %v", p.label(x.c), x.r.answers, x.r.violation)
		if len(x.r.answers) == 0 || !strings.HasPrefix(x.r.answers[0], "root found: <JOB> <NODE1>") {
			t.Errorf("%s: root's callerid did not name the job on its node: %q", p.label(x.c), x.r.answers)
		}
		if !x.r.violation {
			t.Errorf("%s: the node did not log the ordinary user's security violation", p.label(x.c))
		}
	}
	if strings.Join(ref.answers, "\n") != strings.Join(sut.answers, "\n") {
		t.Errorf("scontrol callerid (normalized):\nreference:\n  %q\nunder test:\n  %q", ref.answers, sut.answers)
	}
}

func callerIDOn(t *testing.T, c *cluster.Cluster) callerIDRun {
	conf, err := os.ReadFile(c.ConfPath)
	if err != nil {
		t.Fatal(err)
	}
	n1 := node(c, 0)
	copyPath := filepath.Join(c.Dir, "callerid.conf")
	b := slurmdPortRe.ReplaceAll(conf, []byte(fmt.Sprintf("SlurmdPort=%d", c.Nodes[0].Port)))
	if err := os.WriteFile(copyPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := c.WorkDir(t, "root", "callerid")
	job := c.SbatchIn(t, "root", dir, callerIDScript, "-w", n1, "-N1", "-t", "5", "-o", "/dev/null")
	defer c.Run(t, "root", "scancel", job)
	var ports []string
	c.WaitFor(t, "job "+job+"'s connection", callerIDTimeout, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(dir, "conn"))
		if err != nil {
			return false, err.Error()
		}
		ports = strings.Fields(string(b))
		return len(ports) == 2, string(b)
	})
	// Only the job id and the node name differ between the clusters.
	words := map[string]string{job: "<JOB>", n1: "<NODE1>"}
	norm := func(s string) string {
		f := strings.Fields(s)
		for i, w := range f {
			if l, ok := words[w]; ok {
				f[i] = l
			}
		}
		return strings.Join(f, " ")
	}
	ask := func(label, user string, args ...string) string {
		out, errOut, err := c.Exec(t, cluster.Cmd{User: user, Env: []string{"SLURM_CONF=" + copyPath},
			Args: append([]string{"scontrol", "callerid"}, args...)})
		return fmt.Sprintf("%s: %s%s exit=%v", label, norm(strings.TrimSpace(out)), norm(strings.TrimSpace(errOut)), err != nil)
	}
	var r callerIDRun
	r.answers = append(r.answers,
		ask("root found", "root", "127.0.0.1", ports[0], "127.0.0.1", ports[1]),
		ask("user, root's job", cluster.TestUser, "127.0.0.1", ports[0], "127.0.0.1", ports[1]),
		ask("root, no such connection", "root", "127.0.0.1", "1", "127.0.0.1", "2"))
	r.violation = strings.Contains(readFileQuiet(c.NodeLog(n1)), "Security violation, REQUEST_NETWORK_CALLERID from uid=")
	return r
}
