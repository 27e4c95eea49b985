package jobmgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestCredState: revocations survive a restart (a new Manager on the same
// spool dir refuses the old credential, accepts a newer one); stale ones
// and an unreadable file are dropped without failing the start.
func TestCredState(t *testing.T) {
	spool := t.TempDir()
	m := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	old := time.Now().Add(-2 * RevokedKeep)
	m.mu.Lock()
	m.jobs[7] = &job{revokedAt: at}
	m.jobs[8] = &job{revokedAt: old}
	m.jobs[9] = &job{} // not revoked
	m.saveStateLocked()
	m.mu.Unlock()

	m2 := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	m2.Recover(context.Background(), false)
	if _, revoked := m2.incarnation(7, 0, 0, at.Add(-time.Second)); !revoked {
		t.Errorf("job 7: a credential from before the revocation is not refused after a restart")
	}
	if j, revoked := m2.incarnation(7, 0, 0, at.Add(time.Second)); revoked || j == nil {
		t.Errorf("job 7: a newer credential (requeue) is refused")
	}
	if m2.revoked(8) || m2.revoked(9) {
		t.Errorf("stale or unrevoked jobs restored: 8=%v 9=%v", m2.revoked(8), m2.revoked(9))
	}

	if err := os.WriteFile(filepath.Join(spool, CredStateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	m3 := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	m3.Recover(context.Background(), false) // logs, does not fail
	if m3.revoked(7) {
		t.Errorf("state restored from an unreadable file")
	}
}

// TestCredSeen: a step credential is refused as replayed the second time, also by a
// daemon restarted on the same spool dir after a save, until it expires.
func TestCredSeen(t *testing.T) {
	spool := t.TempDir()
	m := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	st := slurmproto.StepID{JobID: 42, StepID: 3, StepHetComp: slurmproto.NoVal}
	ctime := time.Now().Truncate(time.Second)
	if m.credSeen(st, ctime, ctime.Add(2*time.Minute)) {
		t.Fatal("first use reported as a replay")
	}
	if !m.credSeen(st, ctime, ctime.Add(2*time.Minute)) {
		t.Fatal("second use not reported as a replay")
	}
	if m.credSeen(st, ctime.Add(time.Second), ctime.Add(2*time.Minute)) {
		t.Fatal("a newer credential of the same step reported as a replay")
	}
	gone := slurmproto.StepID{JobID: 43, StepID: 0, StepHetComp: slurmproto.NoVal}
	m.credSeen(gone, ctime.Add(-time.Hour), ctime.Add(-time.Minute)) // already expired
	m.mu.Lock()
	m.saveStateLocked() // what a successful launch does
	m.mu.Unlock()

	m2 := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	m2.Recover(context.Background(), false)
	if !m2.credSeen(st, ctime, ctime.Add(2*time.Minute)) {
		t.Error("after a restart the credential is accepted again")
	}
	if m2.credSeen(gone, ctime.Add(-time.Hour), ctime.Add(-time.Minute)) {
		t.Error("an expired credential was kept across the restart")
	}
}

// TestLaunchReplied: once a launch's answer could not be sent, the credential that launch
// recorded is forgotten (slurm_cred_rewind), in memory and in the state file, so srun's
// retry is not a replay; one recorded by an earlier launch stays. A successful launch
// whose answer went out saves the record (save_cred_state).
func TestLaunchReplied(t *testing.T) {
	spool := t.TempDir()
	m := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	ctime := time.Now().Truncate(time.Second)
	exp := ctime.Add(2 * time.Minute)
	sent := slurmproto.StepID{JobID: 50, StepID: 0, StepHetComp: slurmproto.NoVal}
	lost := slurmproto.StepID{JobID: 51, StepID: 0, StepHetComp: slurmproto.NoVal}
	for _, st := range []slurmproto.StepID{sent, lost} {
		if m.credSeen(st, ctime, exp) {
			t.Fatal("first use reported as a replay")
		}
	}
	m.launchReplied(sent, 0, &credKey{step: sent, ctime: ctime.Unix()})(nil)
	m.launchReplied(lost, 0, &credKey{step: lost, ctime: ctime.Unix()})(errors.New("connection reset by peer"))
	// A replay refused before anything was recorded rewinds nothing.
	m.launchReplied(sent, slurmproto.ESlurmdCredentialReplayed, nil)(errors.New("connection reset by peer"))

	m2 := testManager(t, "SlurmdSpoolDir="+spool+"\n")
	m2.Recover(context.Background(), false)
	for _, mm := range []*Manager{m, m2} {
		if !mm.credSeen(sent, ctime, exp) {
			t.Error("the credential of the answered launch was forgotten")
		}
		if mm.credSeen(lost, ctime, exp) {
			t.Error("the credential of the launch whose answer was lost is still recorded: srun's retry would be a replay")
		}
	}
}
