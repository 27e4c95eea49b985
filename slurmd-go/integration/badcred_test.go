//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// goldenLaunch is an srun launch captured from the stock slurmd of the release whose
// protocol version is v, with munge (pkg/slurmproto's golden frames: 22.05.8's in
// launch_tasks/, 24.11.5's and 26.05.5's in r2411/ and r2605/).
func goldenLaunch(v uint16) string {
	dir := map[uint16]string{slurmproto.Version2205: "launch_tasks", slurmproto.Version2411: "r2411/munge", slurmproto.Version2605: "r2605/munge"}[v]
	return fmt.Sprintf("../pkg/slurmproto/testdata/%s/launch_tasks_1node_v%04x.bin", dir, v)
}

// launchFor decodes the captured launch of the cluster's release and aims it at node as
// a root step of job: a launch a root srun could have sent, with a credential that passes
// every check. Each call returns a fresh copy for one case to spoil.
func launchFor(t *testing.T, cl *cluster.Cluster, node string, job uint32) *slurmproto.LaunchTasks {
	t.Helper()
	frame, err := os.ReadFile(goldenLaunch(cl.ProtocolVersion))
	if err != nil {
		t.Fatalf("no srun launch captured from Slurm %s (protocol 0x%04x): %v", cl.Release, cl.ProtocolVersion, err)
	}
	m, err := slurmproto.DecodeMessage(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	b, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		t.Fatal(err)
	}
	l := b.(*slurmproto.LaunchTasks)
	step := slurmproto.StepID{JobID: job, StepID: 0, StepHetComp: slurmproto.NoVal}
	l.StepID, l.UID, l.GID, l.UserName, l.Gids = step, 0, 0, "root", []uint32{0}
	l.CompleteNodelist = node
	c := l.Cred
	c.StepID, c.UID, c.GID, c.PwName, c.Gids, c.GrNames = step, 0, 0, "root", []uint32{0}, nil
	c.StepHostlist, c.JobHostlist = node, node
	c.CTime = time.Now().Truncate(time.Second)
	return l
}

// signCred packs the credential's fields for protocol version v and signs them with munge
// as root, as slurmctld does (sign: nil), or with the given signer.
func signCred(t *testing.T, v uint16, m *munge.Munge, c *slurmproto.Cred, sign func(payload []byte) string) {
	t.Helper()
	c.Signed = nil
	fields, err := c.PackFields(v)
	if err != nil {
		t.Fatal(err)
	}
	c.Signed = fields
	if sign != nil {
		c.Signature = []byte(sign(fields))
		return
	}
	sig, err := m.Encode(context.Background(), fields, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	c.Signature = []byte(sig)
}

// mungeAs encodes payload with the munge CLI as an ordinary user.
func mungeAs(t *testing.T, user string, payload []byte) string {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid="+user, "--regid="+user, "--init-groups", "munge", "--input=-")
	cmd.Stdin = strings.NewReader(string(payload))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("munge as %s: %v", user, err)
	}
	return strings.TrimSpace(string(out))
}

// TestLaunch_BadCredentials sends REQUEST_LAUNCH_TASKS with a spoiled step credential
// straight to a node daemon, as root (an authorized sender, so only the credential can be
// wrong), and checks the return code of each refusal. The codes are stock 22.05.8's
// (`make integration-stock` runs this against it); nothing is started and the daemon keeps
// serving. Each case is its own job: slurmd remembers every credential that passed its
// signature and expiry checks (job, step, creation time) and refuses it the next time as
// replayed, even re-signed, which the last case shows.
func TestLaunch_BadCredentials(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	c.Run(t, "", "true") // makes sure the test user exists
	p := newRawPeer(t, c)
	m := p.m
	node := c.Nodes[0].Name
	v := c.ProtocolVersion
	// sendAs sends the launch with the RPC's munge credential from user ("": root).
	sendAs := func(t *testing.T, user string, l *slurmproto.LaunchTasks) uint32 {
		t.Helper()
		body, err := slurmproto.EncodeBody(v, l)
		if err != nil {
			t.Fatal(err)
		}
		// Both daemons answer a launch, refused or not, with RESPONSE_SLURM_RC_MSG.
		r := p.send(t, p.frameAs(t, user, v, slurmproto.RequestLaunchTasks, body))
		if r == nil || r.Header.MsgType != slurmproto.ResponseSlurmRCMsg {
			t.Fatalf("reply %+v, want RESPONSE_SLURM_RC_MSG", r)
		}
		b, err := slurmproto.DecodeBody(r.Header.Version, r.Header.MsgType, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b.(*slurmproto.ReturnCodeMsg).RC
	}
	send := func(t *testing.T, l *slurmproto.LaunchTasks) uint32 { t.Helper(); return sendAs(t, "", l) }
	const firstJob = 990001
	for i, tc := range []struct {
		name  string
		spoil func(t *testing.T, l *slurmproto.LaunchTasks)
		rc    uint32
	}{
		{"this node not in the step's node list", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.CompleteNodelist = "nosuchnode"
			signCred(t, v, m, l.Cred, nil)
		}, slurmproto.ESlurmInvalidNodeName},
		{"expired credential", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.CTime = l.Cred.CTime.Add(-time.Hour)
			signCred(t, v, m, l.Cred, nil)
		}, slurmproto.ESlurmdCredentialExpired},
		{"fields changed after signing", func(t *testing.T, l *slurmproto.LaunchTasks) {
			signCred(t, v, m, l.Cred, nil)
			l.Cred.JobPartition = "other"
			signed := l.Cred.Signed
			l.Cred.Signed = nil
			fields, err := l.Cred.PackFields(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(fields) == string(signed) {
				t.Fatal("the change did not reach the packed fields")
			}
			l.Cred.Signed = fields
		}, slurmproto.ESlurmdInvalidJobCredential},
		{"signed by an ordinary user", func(t *testing.T, l *slurmproto.LaunchTasks) {
			signCred(t, v, m, l.Cred, func(payload []byte) string { return mungeAs(t, cluster.TestUser, payload) })
		}, slurmproto.ESlurmdInvalidJobCredential},
		{"credential for another uid", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.UID = 1
			signCred(t, v, m, l.Cred, nil)
		}, slurmproto.ESlurmdInvalidJobCredential},
		{"credential for another step", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.StepID.StepID = 7
			signCred(t, v, m, l.Cred, nil)
		}, slurmproto.ESlurmdInvalidJobCredential},
		{"this node not in the credential's host list", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.StepHostlist = "nosuchnode"
			signCred(t, v, m, l.Cred, nil)
		}, slurmproto.ESlurmdInvalidJobCredential},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := launchFor(t, c, node, firstJob+uint32(i))
			tc.spoil(t, l)
			if got := send(t, l); got != tc.rc {
				t.Fatalf("rc %s (%d), want %s (%d)", slurmproto.RCName(got), got, slurmproto.RCName(tc.rc), tc.rc)
			}
		})
	}
	t.Run("the same credential again, re-signed", func(t *testing.T) {
		l := launchFor(t, c, node, firstJob+100)
		l.UID = 1 // refused after the credential was recorded
		signCred(t, v, m, l.Cred, nil)
		if got := send(t, l); got != slurmproto.ESlurmdInvalidJobCredential {
			t.Fatalf("first: rc %s, want ESLURMD_INVALID_JOB_CREDENTIAL", slurmproto.RCName(got))
		}
		l.UID = 0
		signCred(t, v, m, l.Cred, nil) // a fresh munge signature: only slurmd's own record can tell
		if got := send(t, l); got != slurmproto.ESlurmdCredentialReplayed {
			t.Fatalf("second: rc %s, want ESLURMD_CREDENTIAL_REPLAYED", slurmproto.RCName(got))
		}
	})
	// An ordinary user may only launch its own steps: a sound root credential sent by it
	// is refused before the credential is looked at, so it is not used up; root's own
	// launch of it afterwards reaches the credential checks (and is refused only for the
	// uid spoiled to keep the step from running), not refused as replayed.
	t.Run("an ordinary user sends a root step", func(t *testing.T) {
		l := launchFor(t, c, node, firstJob+200)
		signCred(t, v, m, l.Cred, nil)
		if got := sendAs(t, cluster.TestUser, l); got != slurmproto.ESlurmUserIDMissing {
			t.Fatalf("from %s: rc %s (%d), want ESLURM_USER_ID_MISSING", cluster.TestUser, slurmproto.RCName(got), got)
		}
		l.UID = 1
		if got := send(t, l); got != slurmproto.ESlurmdInvalidJobCredential {
			t.Fatalf("then from root: rc %s (%d), want ESLURMD_INVALID_JOB_CREDENTIAL (the credential unused)", slurmproto.RCName(got), got)
		}
	})
	t.Run("nothing started, still serving", func(t *testing.T) {
		wantPing(t, p.send(t, p.frame(t, v, slurmproto.RequestPing, nil, nil)), v)
		if !c.NodeRunning(node) {
			t.Fatal("node daemon died")
		}
		// A refused launch leaves no step behind: no step socket in the spool directory.
		socks, _ := filepath.Glob(filepath.Join(c.Dir, "spool", "*", "*_9900*.*"))
		if len(socks) != 0 {
			t.Fatalf("step sockets of the refused job: %v", socks)
		}
	})
}
