package jobmgr

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
