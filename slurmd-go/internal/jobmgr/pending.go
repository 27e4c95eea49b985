package jobmgr

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Messages the daemon itself owes slurmctld (REQUEST_COMPLETE_PROLOG) are
// written to SlurmdSpoolDir/PendingDir before the first try and removed
// once slurmctld took them (or RetryFor passed), so a daemon restarted in
// between sends them again. The step managers keep their own completions.

// PendingDir is the directory of owed messages under SlurmdSpoolDir.
const PendingDir = "slurmd-go.pending"

// pendingMsg is one owed message on disk: its type and body, packed at
// Version (the controller's when it was written; a file without one is
// from a daemon that spoke only 22.05). It is re-packed at whatever version
// the controller speaks when it is resent.
type pendingMsg struct {
	What    string `json:"what"`
	Type    uint16 `json:"type"`
	Version uint16 `json:"version,omitempty"`
	Body    []byte `json:"body"`
}

// durableRetry is retry with the message kept on disk meanwhile; name
// identifies it (one file per job and kind).
func (m *Manager) durableRetry(ctx context.Context, what, name string, body slurmproto.Body) error {
	path := m.pendingPath(name)
	if path != "" {
		if err := m.writePending(path, what, body); err != nil {
			m.log.Warn("cannot keep owed message on disk", "what", what, "error", err)
			path = ""
		}
	}
	err := m.retry(ctx, what, body)
	if path != "" {
		_ = os.Remove(path)
	}
	return err
}

func (m *Manager) pendingPath(name string) string {
	dir := m.cfg().SpoolDir
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, PendingDir, name)
}

func (m *Manager) writePending(path, what string, body slurmproto.Body) error {
	v := m.protocol()
	b, err := slurmproto.EncodeBody(v, body)
	if err != nil {
		return err
	}
	j, _ := json.Marshal(pendingMsg{What: what, Type: uint16(body.MsgType()), Version: v, Body: b})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return renameio.WriteFile(path, j, 0o600, renameio.WithTempDir(filepath.Dir(path)))
}

// protocol is the controller's protocol version, 22.05's while unknown.
func (m *Manager) protocol() uint16 {
	if m.ctld != nil {
		if v := m.ctld.Version(); v != 0 {
			return v
		}
	}
	return slurmproto.Version2205
}

// resendPending starts the retries of the messages an earlier daemon still
// owed (Recover). A file that cannot be read is logged and removed.
func (m *Manager) resendPending() {
	dir := m.pendingPath("")
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") || strings.HasSuffix(e.Name(), ".tmp") {
			// A write cut short: renameio's temporary file (".<name>…"),
			// or an older daemon's "<name>.tmp".
			_ = os.Remove(path)
			continue
		}
		p, body, err := readPending(path)
		if err != nil {
			m.log.Warn("dropping unreadable owed message", "path", path, "error", err)
			_ = os.Remove(path)
			continue
		}
		m.log.Info("resending a message an earlier daemon owed slurmctld", "what", p.What)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := m.retry(context.Background(), p.What, body)
			_ = os.Remove(path)
			if err != nil {
				m.log.Error("slurmctld never took an owed message", "what", p.What, "error", err)
			}
		}()
	}
}

func readPending(path string) (pendingMsg, slurmproto.Body, error) {
	var p pendingMsg
	b, err := os.ReadFile(path)
	if err != nil {
		return p, nil, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, nil, err
	}
	if p.Version == 0 {
		p.Version = slurmproto.Version2205
	}
	body, err := slurmproto.DecodeBody(p.Version, slurmproto.MsgType(p.Type), p.Body)
	if err != nil {
		return p, nil, fmt.Errorf("jobmgr: owed %s: %w", p.What, err)
	}
	return p, body, nil
}
