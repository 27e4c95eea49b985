package credverify

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// slurmUser is the SlurmUser uid the tests configure (not root).
const slurmUser = 64030

// goldenDir holds the frames captured from stock 22.05.8 (see
// pkg/slurmproto/testdata/README.md, "srun steps").
var goldenDir = filepath.Join("..", "..", "pkg", "slurmproto", "testdata", "launch_tasks")

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenLaunch decodes a captured REQUEST_LAUNCH_TASKS frame (u32 length
// prefix, header, auth, body) the way msgs_launch_test.go does.
func goldenLaunch(t *testing.T, name string) *slurmproto.LaunchTasks {
	t.Helper()
	frame := readGolden(t, name)
	if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
		t.Fatalf("%s: length prefix %d for %d bytes", name, n, len(frame)-4)
	}
	m, err := slurmproto.DecodeMessage(frame[4:])
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	if m.Header.MsgType != slurmproto.RequestLaunchTasks {
		t.Fatalf("%s: message type %v", name, m.Header.MsgType)
	}
	b, err := slurmproto.DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
	if err != nil {
		t.Fatalf("DecodeBody: %v", err)
	}
	return b.(*slurmproto.LaunchTasks)
}

// resign replaces c's (real munge) signature with a fake munge credential
// made by uid over payload at c's creation time, with the trailing NUL of
// the wire form.
func resign(c *slurmproto.Cred, uid uint32, payload []byte, seq uint64) {
	c.Signature = []byte(authtest.Forge(uid, uid, auth.UIDAny, payload, c.CTime, seq) + "\x00")
}

// goldenCred is the credential of a captured launch, signed by root with
// the captured munge payload (which is the credential's Signed bytes).
func goldenCred(t *testing.T, launch, payload string) *slurmproto.Cred {
	t.Helper()
	c := goldenLaunch(t, launch).Cred
	p := readGolden(t, payload)
	if !bytes.Equal(c.Signed, p) {
		t.Fatalf("%s: Signed (%d bytes) is not the captured munge payload (%d bytes)", launch, len(c.Signed), len(p))
	}
	resign(c, 0, p, 1)
	return c
}

// fixture is a verifier whose fake munge and clock sit a few seconds after
// the credential's creation.
func fixture(c *slurmproto.Cred) (*Verifier, *authtest.Fake) {
	f := authtest.New(0, 0)
	f.SetClock(func() time.Time { return c.CTime.Add(time.Second) })
	v := &Verifier{Auth: f, SlurmUserUID: slurmUser, Expire: 120 * time.Second,
		Now: func() time.Time { return c.CTime.Add(5 * time.Second) }}
	return v, f
}

func step(job, st uint32) slurmproto.StepID {
	return slurmproto.StepID{JobID: job, StepID: st, StepHetComp: slurmproto.NoVal}
}

// TestVerify_Golden1Node: srun -N1 -n2 on j1 (job 1, uid/gid 1002): two
// cores of a two-core node for job and step, 1000 MiB for both.
func TestVerify_Golden1Node(t *testing.T) {
	c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
	v, _ := fixture(c)
	w := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	tests := []struct {
		name     string
		tasks    int
		nodeCPUs int
		want     Checked
	}{
		// Two cores, two CPUs: no scaling.
		{"2 cpus", 2, 2, Checked{JobNodeIndex: 0, JobCPUs: 2, StepCPUs: 2, JobMemMiB: 1000, StepMemMiB: 1000}},
		// 4 CPUs on 2 cores: each core counts twice.
		{"4 cpus scale x2", 2, 4, Checked{JobNodeIndex: 0, JobCPUs: 4, StepCPUs: 4, JobMemMiB: 1000, StepMemMiB: 1000}},
		// 5/2 = 2: integer factor.
		{"5 cpus scale x2", 2, 5, Checked{JobNodeIndex: 0, JobCPUs: 4, StepCPUs: 4, JobMemMiB: 1000, StepMemMiB: 1000}},
		// 3/2 = 1: no scaling.
		{"3 cpus no scale", 2, 3, Checked{JobNodeIndex: 0, JobCPUs: 2, StepCPUs: 2, JobMemMiB: 1000, StepMemMiB: 1000}},
		// Fewer CPUs than cores (node CPU count unknown): no scaling down.
		{"1 cpu", 2, 1, Checked{JobNodeIndex: 0, JobCPUs: 2, StepCPUs: 2, JobMemMiB: 1000, StepMemMiB: 1000}},
		// No tasks here: slurmd's CPU counts are 1, memory still comes from the cred.
		{"no tasks", 0, 2, Checked{JobNodeIndex: 0, JobCPUs: 1, StepCPUs: 1, JobMemMiB: 1000, StepMemMiB: 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), c, w, tc.tasks, tc.nodeCPUs)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != tc.want {
				t.Errorf("Checked = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestVerify_Golden2Node: srun -N2 -n2 --mem=30 (job 7 on j[1-2]): the
// job bitmap 0x6 over 2x2 cores gives core 1 of j1 and core 0 of j2; j2 is
// job node index 1; 30 MiB for both.
func TestVerify_Golden2Node(t *testing.T) {
	c := goldenCred(t, "launch_tasks_2node_v2600.bin", "launch_tasks_2node_cred_payload.bin")
	v, _ := fixture(c)
	for _, tc := range []struct {
		node     string
		nodeCPUs int
		want     Checked
	}{
		{"j1", 2, Checked{JobNodeIndex: 0, JobCPUs: 1, StepCPUs: 1, JobMemMiB: 30, StepMemMiB: 30}},
		{"j2", 2, Checked{JobNodeIndex: 1, JobCPUs: 1, StepCPUs: 1, JobMemMiB: 30, StepMemMiB: 30}},
		{"j2", 4, Checked{JobNodeIndex: 1, JobCPUs: 2, StepCPUs: 2, JobMemMiB: 30, StepMemMiB: 30}},
	} {
		t.Run(fmt.Sprintf("%s/%dcpus", tc.node, tc.nodeCPUs), func(t *testing.T) {
			got, err := v.Verify(context.Background(), c, Want{Step: step(7, 0), UID: 1002, GID: 1002, NodeName: tc.node}, 1, tc.nodeCPUs)
			if err != nil || got != tc.want {
				t.Errorf("Verify = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// synthCred is a three-node job n[1-3] whose step runs on n[2-3]:
//
//	n1: 2 sockets x 4 cores, all 8 for the job, none for the step
//	n2: 1 x 2 cores, both for the job, core 1 for the step
//	n3: 1 x 2 cores, core 0 for the job, none for the step
//
// Memory: job 100 MiB on n1, 50 on n2 and n3; step 40 on its first node
// (n2) and 0 (= the job's) on its second (n3).
func synthCred(t *testing.T) *slurmproto.Cred {
	t.Helper()
	jobBits, stepBits := slurmproto.NewBitmap(12), slurmproto.NewBitmap(12)
	for i := 0; i < 8; i++ {
		jobBits.Set(i)
	}
	jobBits.Set(8)
	jobBits.Set(9)
	jobBits.Set(10)
	stepBits.Set(9)
	c := &slurmproto.Cred{
		StepID: step(5, 2), UID: 1000, GID: 1001, PwName: "u",
		StepHostlist: "n[2-3]", CTime: time.Unix(1_800_000_000, 0), TotCoreCnt: 12,
		JobCoreBitmap: jobBits, StepCoreBitmap: stepBits,
		CoresPerSocket: []uint16{4, 2}, SocketsPerNode: []uint16{2, 1}, SockCoreRepCount: []uint32{1, 2},
		JobNHosts: 3, JobNTasks: 3, JobHostlist: "n[1-3]",
		JobMemAlloc: []uint64{100, 50}, JobMemAllocRepCount: []uint32{1, 2},
		StepMemAlloc: []uint64{40, 0}, StepMemAllocRepCount: []uint32{1, 1},
	}
	seal(t, c)
	return c
}

// seal packs c's fields as its Signed bytes and signs them as root.
func seal(t *testing.T, c *slurmproto.Cred) {
	t.Helper()
	c.Signed = nil
	b, err := c.PackFields(slurmproto.Version2205)
	if err != nil {
		t.Fatal(err)
	}
	c.Signed = b
	resign(c, 0, b, 1)
}

// TestVerify_CPUsAndMemory: req.c's CPU count: this node's bits of the
// job and step core bitmaps (cut out by the socket/core rep arrays), a
// step without cores counts 1, both scaled by node CPUs / node cores when
// that is > 1; memory by job index (job) and step host index (step), a
// zero step limit falling back to the job's.
func TestVerify_CPUsAndMemory(t *testing.T) {
	c := synthCred(t)
	v, _ := fixture(c)
	w := func(node string) Want { return Want{Step: step(5, 2), UID: 1000, GID: 1001, NodeName: node} }
	tests := []struct {
		node     string
		tasks    int
		nodeCPUs int
		want     Checked
	}{
		{"n2", 1, 2, Checked{JobNodeIndex: 1, JobCPUs: 2, StepCPUs: 1, JobMemMiB: 50, StepMemMiB: 40}},
		{"n2", 1, 4, Checked{JobNodeIndex: 1, JobCPUs: 4, StepCPUs: 2, JobMemMiB: 50, StepMemMiB: 40}},
		{"n2", 1, 7, Checked{JobNodeIndex: 1, JobCPUs: 6, StepCPUs: 3, JobMemMiB: 50, StepMemMiB: 40}},
		{"n2", 0, 4, Checked{JobNodeIndex: 1, JobCPUs: 1, StepCPUs: 1, JobMemMiB: 50, StepMemMiB: 40}},
		// No step cores here: "zero processors allocated to step" → 1,
		// then scaled like the job's.
		{"n3", 1, 2, Checked{JobNodeIndex: 2, JobCPUs: 1, StepCPUs: 1, JobMemMiB: 50, StepMemMiB: 50}},
		{"n3", 3, 4, Checked{JobNodeIndex: 2, JobCPUs: 2, StepCPUs: 2, JobMemMiB: 50, StepMemMiB: 50}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%dtasks/%dcpus", tc.node, tc.tasks, tc.nodeCPUs), func(t *testing.T) {
			got, err := v.Verify(context.Background(), c, w(tc.node), tc.tasks, tc.nodeCPUs)
			if err != nil || got != tc.want {
				t.Errorf("Verify = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}

	// A node of the job that is not in the step is refused.
	if _, err := v.Verify(context.Background(), c, w("n1"), 1, 8); RC(err) != slurmproto.ESlurmdInvalidJobCredential ||
		!strings.Contains(fmt.Sprint(err), "not in credential host list") {
		t.Errorf("n1 (job, not step): %v", err)
	}

	// In the step but not in the job: refused when tasks run here,
	// accepted (index 0, 1 CPU) when none do.
	c2 := synthCred(t)
	c2.StepHostlist = "n[2-4]"
	seal(t, c2)
	if _, err := v.Verify(context.Background(), c2, w("n4"), 1, 2); RC(err) != slurmproto.ESlurmdInvalidJobCredential ||
		!strings.Contains(fmt.Sprint(err), "invalid host index -1") {
		t.Errorf("n4 (step, not job): %v", err)
	}
	if got, err := v.Verify(context.Background(), c2, w("n4"), 0, 2); err != nil || got.JobNodeIndex != 0 || got.StepCPUs != 1 || got.JobCPUs != 1 {
		t.Errorf("n4 without tasks: %+v, %v", got, err)
	}

	// A host index beyond job_nhosts is refused.
	c3 := synthCred(t)
	c3.JobNHosts = 2
	seal(t, c3)
	if _, err := v.Verify(context.Background(), c3, w("n3"), 1, 2); RC(err) != slurmproto.ESlurmdInvalidJobCredential ||
		!strings.Contains(fmt.Sprint(err), "invalid host index 2") {
		t.Errorf("host index 2 of job_nhosts 2: %v", err)
	}

	// job_nhosts 0: no core counting at all.
	c4 := synthCred(t)
	c4.JobNHosts = 0
	seal(t, c4)
	if got, err := v.Verify(context.Background(), c4, w("n2"), 1, 4); err != nil || got.JobCPUs != 1 || got.StepCPUs != 1 || got.JobNodeIndex != 1 {
		t.Errorf("job_nhosts 0: %+v, %v", got, err)
	}

	// No core layout for the node (rep arrays cover only n1).
	c5 := synthCred(t)
	c5.CoresPerSocket, c5.SocketsPerNode, c5.SockCoreRepCount = []uint16{4}, []uint16{2}, []uint32{1}
	seal(t, c5)
	if _, err := v.Verify(context.Background(), c5, w("n2"), 1, 2); RC(err) != slurmproto.ESlurmdInvalidJobCredential ||
		!strings.Contains(fmt.Sprint(err), "no core layout") {
		t.Errorf("no core layout: %v", err)
	}
}

// TestVerify_Refusals: every check refuses with the Slurm code slurmd
// sends back to srun.
func TestVerify_Refusals(t *testing.T) {
	const (
		invalid  = slurmproto.ESlurmdInvalidJobCredential
		expired  = slurmproto.ESlurmdCredentialExpired
		replayed = slurmproto.ESlurmdCredentialReplayed
	)
	good := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	tests := []struct {
		name   string
		edit   func(c *slurmproto.Cred, v *Verifier, f *authtest.Fake, w *Want)
		rc     uint32
		substr string
		is     error // errors.Is target, if any
	}{
		{"unsigned (empty)", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) { c.Signature = nil },
			invalid, "not signed", nil},
		{"unsigned (u32 0 + NUL padding)", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) { c.Signature = []byte{0, 0} },
			invalid, "not signed", nil},
		{"no signed bytes", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) { c.Signed = nil },
			invalid, "no signed bytes", nil},
		{"the real munge signature", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) {
			c.Signature = []byte("MUNGE:AwQFAAA6tfq01vuf:\x00")
		}, invalid, "signature", auth.ErrInvalid},
		{"payload one byte short", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) {
			resign(c, 0, c.Signed[:len(c.Signed)-1], 2)
		}, invalid, "does not cover", nil},
		{"payload one byte changed", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) {
			p := bytes.Clone(c.Signed)
			p[len(p)/2] ^= 1
			resign(c, 0, p, 2)
		}, invalid, "does not cover", nil},
		{"fields changed after signing", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) {
			c.Signed = bytes.Clone(c.Signed)
			c.Signed[0] ^= 1
		}, invalid, "does not cover", nil},
		{"signed by the user", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) {
			resign(c, 1002, c.Signed, 2)
		}, invalid, "signed by uid 1002", nil},
		{"munge ttl expired", func(c *slurmproto.Cred, _ *Verifier, f *authtest.Fake, _ *Want) {
			f.SetClock(func() time.Time { return c.CTime.Add(time.Hour) })
		}, invalid, "signature", auth.ErrExpired},
		{"munged down", func(_ *slurmproto.Cred, _ *Verifier, f *authtest.Fake, _ *Want) { f.FailDecode(auth.ErrUnavailable) },
			invalid, "signature", auth.ErrUnavailable},
		{"expired", func(c *slurmproto.Cred, v *Verifier, _ *authtest.Fake, _ *Want) {
			v.Now = func() time.Time { return c.CTime.Add(121 * time.Second) }
		}, expired, "expired", nil},
		// Expiry is checked before the step: an old credential for
		// another step is "expired", as in slurm_cred_verify.
		{"expired and other job", func(c *slurmproto.Cred, v *Verifier, _ *authtest.Fake, w *Want) {
			v.Now = func() time.Time { return c.CTime.Add(10 * time.Minute) }
			w.Step.JobID = 2
		}, expired, "expired", nil},
		// The signature is checked before expiry.
		{"expired and unsigned", func(c *slurmproto.Cred, v *Verifier, _ *authtest.Fake, _ *Want) {
			v.Now = func() time.Time { return c.CTime.Add(10 * time.Minute) }
			c.Signature = nil
		}, invalid, "not signed", nil},
		{"wrong job", func(_ *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, w *Want) { w.Step.JobID = 2 },
			invalid, "credential for 1.0, expected 2.0", nil},
		{"wrong step", func(_ *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, w *Want) { w.Step.StepID = 1 },
			invalid, "credential for 1.0, expected 1.1", nil},
		{"wrong uid", func(_ *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, w *Want) { w.UID = 1003 },
			invalid, "created for uid 1002, expected 1003", nil},
		{"wrong gid", func(_ *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, w *Want) { w.GID = 0 },
			invalid, "created for gid 1002, expected 0", nil},
		{"node not in step", func(_ *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, w *Want) { w.NodeName = "j2" },
			invalid, "host j2 not in credential host list j1", nil},
		{"bad step host list", func(c *slurmproto.Cred, _ *Verifier, _ *authtest.Fake, _ *Want) {
			c.StepHostlist = "j[1-"
		}, invalid, "step host list", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
			v, f := fixture(c)
			w := good
			tc.edit(c, v, f, &w)
			got, err := v.Verify(context.Background(), c, w, 2, 2)
			if err == nil {
				t.Fatalf("Verify accepted: %+v", got)
			}
			var e *Error
			if !errors.As(err, &e) || e.RC != tc.rc || RC(err) != tc.rc {
				t.Errorf("err %v (%T): rc %d, want %d", err, err, RC(err), tc.rc)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("err %q does not mention %q", err, tc.substr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err %v does not wrap %v", err, tc.is)
			}
			if got != (Checked{}) {
				t.Errorf("Checked not zero on error: %+v", got)
			}
		})
	}

	t.Run("nil credential", func(t *testing.T) {
		v := &Verifier{Auth: authtest.New(0, 0), Expire: time.Minute}
		if _, err := v.Verify(context.Background(), nil, good, 1, 1); RC(err) != invalid {
			t.Errorf("err %v", err)
		}
	})
}

// TestVerify_Expiry: valid up to and including ctime + cred_expire.
func TestVerify_Expiry(t *testing.T) {
	c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
	v, _ := fixture(c)
	w := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	for _, tc := range []struct {
		after time.Duration
		rc    uint32
	}{
		{0, 0},
		{120 * time.Second, 0},
		{120*time.Second + 999*time.Millisecond, 0}, // whole seconds, as time_t
		{121 * time.Second, slurmproto.ESlurmdCredentialExpired},
	} {
		v.Now = func() time.Time { return c.CTime.Add(tc.after) }
		_, err := v.Verify(context.Background(), c, w, 2, 2)
		if rc := uint32(0); err != nil {
			rc = RC(err)
			if rc != tc.rc {
				t.Errorf("ctime+%s: %v (rc %d), want rc %d", tc.after, err, rc, tc.rc)
			}
		} else if tc.rc != 0 {
			t.Errorf("ctime+%s: accepted, want rc %d", tc.after, tc.rc)
		}
	}
	// Now nil is the real clock.
	c2 := synthCred(t)
	c2.CTime = time.Now().Add(-time.Hour).Truncate(time.Second)
	seal(t, c2)
	v2, _ := fixture(c2)
	v2.Now = nil
	w2 := Want{Step: step(5, 2), UID: 1000, GID: 1001, NodeName: "n2"}
	v2.Expire = time.Minute
	if _, err := v2.Verify(context.Background(), c2, w2, 1, 2); RC(err) != slurmproto.ESlurmdCredentialExpired {
		t.Errorf("real clock, created an hour ago, 1m window: %v", err)
	}
	v2.Expire = 2 * time.Hour
	if _, err := v2.Verify(context.Background(), c2, w2, 1, 2); err != nil {
		t.Errorf("real clock, created an hour ago, 2h window: %v", err)
	}
}

// TestVerify_Signers: root and SlurmUser may sign; anyone else may not.
func TestVerify_Signers(t *testing.T) {
	w := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	for _, tc := range []struct {
		uid uint32
		ok  bool
	}{{0, true}, {slurmUser, true}, {1002, false}, {slurmUser + 1, false}} {
		c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
		resign(c, tc.uid, c.Signed, 3)
		v, _ := fixture(c)
		_, err := v.Verify(context.Background(), c, w, 2, 2)
		if (err == nil) != tc.ok {
			t.Errorf("signed by uid %d: err %v, want ok=%v", tc.uid, err, tc.ok)
		}
	}
}

// TestVerify_Replay: a credential munge reports as replayed is refused
// with ESLURMD_CREDENTIAL_REPLAYED (the error wraps auth.ErrReplayed);
// with replays allowed (MULTIPLE_SLURMD) it is accepted.
func TestVerify_Replay(t *testing.T) {
	c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
	v, f := fixture(c)
	f.SetReplay(true, false)
	w := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	if _, err := v.Verify(context.Background(), c, w, 2, 2); err != nil {
		t.Fatalf("first use: %v", err)
	}
	_, err := v.Verify(context.Background(), c, w, 2, 2)
	if RC(err) != slurmproto.ESlurmdCredentialReplayed || !errors.Is(err, auth.ErrReplayed) {
		t.Errorf("second use: %v (rc %d)", err, RC(err))
	}
	f.SetReplay(true, true)
	if got, err := v.Verify(context.Background(), c, w, 2, 2); err != nil || got.StepCPUs != 2 {
		t.Errorf("replay allowed: %+v, %v", got, err)
	}
}

// TestVerify_SeenTwice: slurm_cred_verify's own replay check. A credential whose signature
// and expiry pass is recorded (Seen) before the step, user and node checks, so even one
// refused for the wrong uid is replayed when it comes again; an expired one is never
// recorded.
func TestVerify_SeenTwice(t *testing.T) {
	c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
	v, f := fixture(c)
	f.SetReplay(true, true) // munged lets the signature through again (MULTIPLE_SLURMD)
	seen := map[string]time.Time{}
	v.Seen = func(s slurmproto.StepID, ctime, expires time.Time) bool {
		k := fmt.Sprint(s, ctime.Unix())
		_, ok := seen[k]
		seen[k] = expires
		return ok
	}
	wrongUID := Want{Step: step(1, 0), UID: 1003, GID: 1002, NodeName: "j1"}
	if _, err := v.Verify(context.Background(), c, wrongUID, 2, 2); RC(err) != slurmproto.ESlurmdInvalidJobCredential {
		t.Fatalf("wrong uid: %v", err)
	}
	if exp := seen[fmt.Sprint(step(1, 0), c.CTime.Unix())]; !exp.Equal(c.CTime.Add(v.Expire)) {
		t.Fatalf("recorded expiry %v, want ctime+%v", exp, v.Expire)
	}
	right := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	if _, err := v.Verify(context.Background(), c, right, 2, 2); RC(err) != slurmproto.ESlurmdCredentialReplayed {
		t.Fatalf("second use: %v (rc %d), want ESLURMD_CREDENTIAL_REPLAYED", err, RC(err))
	}
	// 24.11 answers the replay ESLURMD_INVALID_JOB_CREDENTIAL (measured on 24.11.5).
	v.Version = slurmproto.Version2411
	if _, err := v.Verify(context.Background(), c, right, 2, 2); RC(err) != slurmproto.ESlurmdInvalidJobCredential || AtUnpack(err) {
		t.Fatalf("second use at 24.11: %v (rc %d), want ESLURMD_INVALID_JOB_CREDENTIAL", err, RC(err))
	}
	v.Version = 0
	v.Now = func() time.Time { return c.CTime.Add(time.Hour) }
	clear(seen)
	if _, err := v.Verify(context.Background(), c, right, 2, 2); RC(err) != slurmproto.ESlurmdCredentialExpired || len(seen) != 0 {
		t.Fatalf("expired: %v, recorded %v", err, seen)
	}
}

// TestRC: an *Error's code, also when wrapped; ESLURMD_INVALID_JOB_CREDENTIAL
// for any other error.
func TestRC(t *testing.T) {
	e := &Error{RC: slurmproto.ESlurmdCredentialExpired, Err: errors.New("old")}
	if RC(e) != slurmproto.ESlurmdCredentialExpired || e.Error() != "old" || errors.Unwrap(e).Error() != "old" {
		t.Errorf("RC(*Error) = %d, %q", RC(e), e.Error())
	}
	if RC(fmt.Errorf("launch: %w", e)) != slurmproto.ESlurmdCredentialExpired {
		t.Error("wrapped *Error lost its code")
	}
	if RC(errors.New("other")) != slurmproto.ESlurmdInvalidJobCredential {
		t.Error("plain error")
	}
	if RC(fail(slurmproto.ESlurmdCredentialReplayed, "x %d", 1)) != slurmproto.ESlurmdCredentialReplayed {
		t.Error("fail")
	}
}

// TestVerify_AtUnpack: from 24.11 a signature that fails (a stranger
// signed it, or it does not cover the fields) refuses the launch as
// malformed, as stock's cred_p_unpack does (measured: RESPONSE_SLURM_RC
// ESLURM_PROTOCOL_INCOMPLETE_PACKET from 24.11.5); 22.05 refuses the
// credential itself. Other refusals are never AtUnpack.
func TestVerify_AtUnpack(t *testing.T) {
	w := Want{Step: step(1, 0), UID: 1002, GID: 1002, NodeName: "j1"}
	for _, tc := range []struct {
		v    uint16
		edit func(c *slurmproto.Cred)
		want bool
	}{
		{slurmproto.Version2205, func(c *slurmproto.Cred) { resign(c, 1002, c.Signed, 3) }, false},
		{slurmproto.Version2411, func(c *slurmproto.Cred) { resign(c, 1002, c.Signed, 3) }, true},
		{slurmproto.Version2605, func(c *slurmproto.Cred) { resign(c, 0, append([]byte{1}, c.Signed...), 3) }, true},
		{slurmproto.Version2411, func(c *slurmproto.Cred) { c.StepHostlist = "elsewhere" }, false},
	} {
		c := goldenCred(t, "launch_tasks_1node_v2600.bin", "launch_tasks_1node_cred_payload.bin")
		tc.edit(c)
		v, _ := fixture(c)
		v.Version = tc.v
		_, err := v.Verify(context.Background(), c, w, 2, 2)
		if err == nil || AtUnpack(err) != tc.want {
			t.Errorf("0x%04x: err %v, AtUnpack %v, want %v", tc.v, err, AtUnpack(err), tc.want)
		}
	}
}
