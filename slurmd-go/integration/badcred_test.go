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
	l := goldenBody(t, cl, goldenLaunch(cl.ProtocolVersion)).(*slurmproto.LaunchTasks)
	step := slurmproto.StepID{JobID: job, StepID: 0, StepHetComp: slurmproto.NoVal}
	l.StepID, l.UID, l.GID, l.UserName, l.Gids = step, 0, 0, "root", []uint32{0}
	l.CompleteNodelist = node
	c := l.Cred
	c.StepID, c.UID, c.GID, c.PwName, c.Gids, c.GrNames = step, 0, 0, "root", []uint32{0}, nil
	c.StepHostlist, c.JobHostlist = node, node
	c.CTime = time.Now().Truncate(time.Second)
	return l
}

// goldenBody decodes the body of the frame captured from c's release at path.
func goldenBody(t *testing.T, c *cluster.Cluster, path string) slurmproto.Body {
	t.Helper()
	frame, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no frame captured from Slurm %s (protocol 0x%04x): %v", c.Release, c.ProtocolVersion, err)
	}
	m, err := slurmproto.DecodeMessage(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	b, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
	// The signature travels as a packstr string, NUL included: 24.11's unpackstr
	// refuses one without it (the whole launch is then malformed).
	if sign != nil {
		c.Signature = append([]byte(sign(fields)), 0)
		return
	}
	sig, err := m.Encode(context.Background(), fields, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	c.Signature = append([]byte(sig), 0)
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
// wrong), and checks the answer to each refusal: the codes of the release's stock slurmd
// (`scripts/integration.sh stock 24.11/munge/all` runs this against it; 22.05.8 and
// 24.11.5 measured), where from 24.11 a bad signature makes the whole launch malformed
// (stockFacts.credCheckedAtUnpack). Nothing is started and the daemon keeps serving.
// Each case is its own job: slurmd remembers every credential that passed its signature
// and expiry checks (job, step, creation time) and refuses it the next time as replayed,
// even re-signed, which the last case shows.
func TestLaunch_BadCredentials(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	c.Run(t, "", "true") // makes sure the test user exists
	if c.Auth != cluster.AuthMunge {
		// cred/slurm launch tokens are checked by TestBadInput_Tokens' launch context
		// case and pkg/auth/authslurm's unit tests; the cases here sign with munge.
		t.Fatalf("cluster %s runs auth/%s: this test signs cred/munge credentials (run it with %s=munge)", c.Name, c.Auth, cluster.EnvAuth)
	}
	facts := factsOf(t, c)
	p := newRawPeer(t, c)
	m := p.m
	node := c.Nodes[0].Name
	v := c.ProtocolVersion
	// answer is a launch's reply: RESPONSE_SLURM_RC_MSG with rc, or (malformed)
	// RESPONSE_SLURM_RC.
	type answer struct {
		rc        uint32
		malformed bool
	}
	// badSignature is the answer to a credential whose signature fails.
	badSignature := answer{rc: slurmproto.ESlurmdInvalidJobCredential}
	if facts.credCheckedAtUnpack {
		badSignature = answer{rc: slurmproto.ESlurmProtocolIncompletePacket, malformed: true}
	}
	// sendAs sends the launch with the RPC's munge credential from user ("": root).
	sendAs := func(t *testing.T, user string, l *slurmproto.LaunchTasks) answer {
		t.Helper()
		body, err := slurmproto.EncodeBody(v, l)
		if err != nil {
			t.Fatal(err)
		}
		r := p.send(t, p.frameAs(t, user, v, slurmproto.RequestLaunchTasks, body))
		if r == nil {
			t.Fatal("no reply: the daemon closed the connection")
		}
		b, err := slurmproto.DecodeBody(r.Header.Version, r.Header.MsgType, r.Body)
		if err != nil {
			t.Fatal(err)
		}
		switch x := b.(type) {
		case *slurmproto.ReturnCodeMsg:
			return answer{rc: x.RC}
		case *slurmproto.ReturnCode:
			return answer{rc: x.RC, malformed: true}
		}
		t.Fatalf("reply %s, want RESPONSE_SLURM_RC_MSG or RESPONSE_SLURM_RC", r.Header.MsgType)
		return answer{}
	}
	send := func(t *testing.T, l *slurmproto.LaunchTasks) answer { t.Helper(); return sendAs(t, "", l) }
	want := func(t *testing.T, what string, got, want answer) {
		t.Helper()
		name := func(a answer) string {
			if a.malformed {
				return fmt.Sprintf("RESPONSE_SLURM_RC %s (%d)", slurmproto.RCName(a.rc), a.rc)
			}
			return fmt.Sprintf("RESPONSE_SLURM_RC_MSG %s (%d)", slurmproto.RCName(a.rc), a.rc)
		}
		if got != want {
			t.Fatalf("%s: %s, want %s", what, name(got), name(want))
		}
	}
	const firstJob = 990001
	for i, tc := range []struct {
		name  string
		spoil func(t *testing.T, l *slurmproto.LaunchTasks)
		want  answer
	}{
		{"this node not in the step's node list", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.CompleteNodelist = "nosuchnode"
			signCred(t, v, m, l.Cred, nil)
		}, answer{rc: slurmproto.ESlurmInvalidNodeName}},
		{"expired credential", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.CTime = l.Cred.CTime.Add(-time.Hour)
			signCred(t, v, m, l.Cred, nil)
		}, answer{rc: slurmproto.ESlurmdCredentialExpired}},
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
		}, badSignature},
		{"signed by an ordinary user", func(t *testing.T, l *slurmproto.LaunchTasks) {
			signCred(t, v, m, l.Cred, func(payload []byte) string { return mungeAs(t, cluster.TestUser, payload) })
		}, badSignature},
		{"credential for another step", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.StepID.StepID = 7
			signCred(t, v, m, l.Cred, nil)
		}, answer{rc: slurmproto.ESlurmdInvalidJobCredential}},
		{"launch for another step than its credential", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.StepID.StepID = 7
			signCred(t, v, m, l.Cred, nil)
		}, answer{rc: slurmproto.ESlurmdInvalidJobCredential}},
		{"this node not in the credential's host list", func(t *testing.T, l *slurmproto.LaunchTasks) {
			l.Cred.StepHostlist = "nosuchnode"
			signCred(t, v, m, l.Cred, nil)
		}, answer{rc: slurmproto.ESlurmdInvalidJobCredential}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := launchFor(t, c, node, firstJob+uint32(i))
			tc.spoil(t, l)
			want(t, "launch", send(t, l), tc.want)
		})
	}
	if !facts.credCheckedAtUnpack {
		// 22.05's launch names its user; the credential must be for it.
		t.Run("credential for another uid", func(t *testing.T) {
			l := launchFor(t, c, node, firstJob+50)
			l.Cred.UID = 1
			signCred(t, v, m, l.Cred, nil)
			want(t, "launch", send(t, l), answer{rc: slurmproto.ESlurmdInvalidJobCredential})
		})
	}
	// A launch refused after its credential passed the signature and expiry checks
	// (its step is not the credential's) uses the credential up.
	t.Run("the same credential again, re-signed", func(t *testing.T) {
		l := launchFor(t, c, node, firstJob+100)
		l.StepID.StepID = 7
		signCred(t, v, m, l.Cred, nil)
		want(t, "first", send(t, l), answer{rc: slurmproto.ESlurmdInvalidJobCredential})
		l.StepID.StepID = 0
		signCred(t, v, m, l.Cred, nil) // a fresh munge signature: only slurmd's own record can tell
		want(t, "second", send(t, l), answer{rc: facts.credReplayedRC})
	})
	// An ordinary user may only launch its own steps: a sound root credential sent by it
	// is refused before the credential is looked at, so it is not used up; root's own
	// launch of it afterwards reaches the credential checks (and is refused only for the
	// step spoiled to keep it from running), not refused as replayed.
	t.Run("an ordinary user sends a root step", func(t *testing.T) {
		l := launchFor(t, c, node, firstJob+200)
		signCred(t, v, m, l.Cred, nil)
		if facts.credCheckedAtUnpack && c.Impl == cluster.ImplStock {
			// Measured: 24.11.5 answers SLURM_SUCCESS and runs the step as root.
			t.Logf("not sent: stock Slurm %s launches it (the credential alone names the user)", c.Release)
		} else {
			want(t, "from "+cluster.TestUser, sendAs(t, cluster.TestUser, l), answer{rc: slurmproto.ESlurmUserIDMissing})
		}
		l.StepID.StepID = 7
		want(t, "then from root (the credential unused)", send(t, l), answer{rc: slurmproto.ESlurmdInvalidJobCredential})
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
