//go:build integration

package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// goldenBatchLaunch is a batch launch captured from the slurmctld of the release whose
// protocol version is v (pkg/slurmproto's golden frames).
func goldenBatchLaunch(v uint16, a string) string {
	dir := map[uint16]string{slurmproto.Version2205: ".", slurmproto.Version2411: "r2411/" + a, slurmproto.Version2605: "r2605/" + a}[v]
	return fmt.Sprintf("../pkg/slurmproto/testdata/%s/batch_job_launch_v%04x.bin", dir, v)
}

// batchLaunchFor decodes the captured batch launch of the cluster's release and aims it
// at node as root's job, with script, its credential signed as slurmctld signs it.
func batchLaunchFor(t *testing.T, c *cluster.Cluster, p rawPeer, node string, job uint32, script string) *slurmproto.BatchJobLaunch {
	t.Helper()
	a := cluster.AuthMunge
	if c.Auth == cluster.AuthSlurm && c.ProtocolVersion >= slurmproto.Version2411 {
		a = cluster.AuthSlurm
	}
	l := goldenBody(t, c, goldenBatchLaunch(c.ProtocolVersion, a)).(*slurmproto.BatchJobLaunch)
	l.JobID, l.UID, l.GID, l.Nodes, l.Script, l.WorkDir = job, 0, 0, node, script, "/tmp"
	l.StdOut, l.StdErr = "/dev/null", "/dev/null"
	cr := l.Cred
	cr.StepID.JobID, cr.UID, cr.GID, cr.PwName, cr.Gids, cr.GrNames = job, 0, 0, "root", []uint32{0}, nil
	cr.StepHostlist, cr.JobHostlist = node, node
	cr.JobStdOut, cr.JobStdErr = "/dev/null", "/dev/null"
	cr.CTime = time.Now().Truncate(time.Second)
	if p.tok == nil {
		signCred(t, c.ProtocolVersion, p.m, cr, nil)
		return l
	}
	// cred/slurm: the credential is a "launch" token over the packed fields, as
	// slurmctld's cred_p_create makes it.
	cr.Token, cr.Signed, cr.Signature = "", nil, nil
	fields, err := cr.PackFields(c.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.tok.MintLaunch(fields, 0, 0, &authslurm.Identity{Name: "root", Dir: "/root", Shell: "/bin/sh", GIDs: []uint32{0}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cr.Token, cr.Signed = tok, fields
	return l
}

// TestBatchLaunch_Unconfirmed (issue 11, finding 9): a batch launch whose answer cannot
// be delivered, because its sender reset the connection (as slurmctld's agent does when
// it gives up on a stalled node), never runs. The launch comes from the test (as root,
// the authorized sender, with a credential signed as slurmctld signs it: slurmctld only
// does this to a node stalled past MessageTimeout), sent while the node daemon is
// stopped (SIGSTOP, standing in for the stall), and the connection is reset before the
// daemon runs again. slurmd-go reads the request the kernel queued before the reset,
// finds its answer undeliverable and aborts the launch with stock's line ("Could not
// confirm batch launch"); stock reads the reset first and drops the request ("Connection
// reset by peer"). Either way no step and no script, the node still serves, and a real
// job runs after.
func TestBatchLaunch_Unconfirmed(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	p := newRawPeer(t, c)
	node := c.Nodes[0].Name
	const job = 990900
	marker := filepath.Join(c.Dir, "unconfirmed-batch-ran")
	l := batchLaunchFor(t, c, p, node, job, "#!/bin/sh\ntouch "+marker+"\n")
	body, err := slurmproto.EncodeBody(c.ProtocolVersion, l)
	if err != nil {
		t.Fatal(err)
	}
	frame := p.frame(t, c.ProtocolVersion, slurmproto.RequestBatchJobLaunch, body, nil)
	log := c.NodeLog(node)
	off := len(readFileQuiet(log))

	pid := c.NodePID(node)
	if pid <= 0 {
		t.Fatalf("no pid for node %s's daemon", node)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT to the node daemon: %v", err)
			}
		}
	}
	defer resume()
	// kill returns before every thread has stopped: wait until each is in state T.
	c.WaitFor(t, "every thread of the node daemon to stop", rawReplyTimeout, func() (bool, string) {
		stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			// The state follows the ")" that ends the command name.
			if i := strings.LastIndexByte(string(b), ')'); i < 0 || !strings.HasPrefix(string(b[i+1:]), " T") {
				return false, f + " not stopped"
			}
		}
		return len(stats) > 0, "no threads listed"
	})
	// The kernel completes the handshake and queues the request for the stopped daemon.
	conn, err := net.DialTimeout("tcp", p.addr, rawReplyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	tc := conn.(*net.TCPConn)
	if _, err := tc.Write(frame); err != nil {
		t.Fatal(err)
	}
	// Linger 0: close resets the connection at once.
	if err := tc.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	_ = tc.Close()
	resume()

	want := map[string]string{cluster.ImplGo: "Could not confirm batch launch", cluster.ImplStock: "Connection reset by peer"}[c.Impl]
	c.WaitFor(t, "the node to drop the reset launch", rawReplyTimeout+c.MessageTimeout, func() (bool, string) {
		tail := readFileQuiet(log)[off:]
		if strings.Contains(tail, "Launching batch job") || strings.Contains(tail, "launching batch job") {
			t.Fatalf("the node launched the job whose answer it could not deliver:\n%s", tail)
		}
		return strings.Contains(tail, want), "node log has no " + strconv.Quote(want)
	})
	// Both decide before any process is started: no step socket, no script.
	socks, _ := filepath.Glob(filepath.Join(c.Dir, "spool", "*", fmt.Sprintf("*_%d.*", job)))
	if len(socks) != 0 {
		t.Fatalf("step sockets of the aborted job: %v", socks)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the aborted job's script ran")
	}
	wantPing(t, p.send(t, p.frame(t, c.ProtocolVersion, slurmproto.RequestPing, nil, nil)), c.ProtocolVersion)
	id := c.Sbatch(t, "", "#!/bin/sh\ntrue\n")
	c.WaitJob(t, id, shortJobTimeout, "COMPLETED")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the aborted job's script ran")
	}
	if !c.NodeRunning(node) {
		t.Fatal("node daemon died")
	}
}
