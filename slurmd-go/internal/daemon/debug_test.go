package daemon

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// scontrol setdebug/setdebugflags nodes=: the level is the daemon's until a
// reconfigure, and the flags change from slurm.conf's DebugFlags with
// stock's log line.
func TestSetDebug(t *testing.T) {
	out := &lockedBuf{}
	d := &Daemon{
		log:   hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Info}),
		debug: debugOverride{level: -1},
	}
	d.cfg.Store(&config.Config{
		Flags: config.Flags{Verbose: 1},
		Conf:  &slurmconf.Config{Version: slurmconf.V2411, SlurmdDebug: slurmconf.LogInfo, DebugFlags: "Gres,Protocol"},
	})
	if got := d.debugLevel(); got != uint16(slurmconf.LogInfo)+1 {
		t.Fatalf("level before: %d", got)
	}
	d.SetDebugLevel(uint32(slurmconf.LogDebug2))
	if got := d.debugLevel(); got != uint16(slurmconf.LogDebug2) {
		t.Errorf("level after setdebug debug2: %d", got)
	}
	if d.log.GetLevel() != hclog.Trace {
		t.Errorf("hclog level %v, want trace for debug2", d.log.GetLevel())
	}
	d.SetDebugFlags(1<<6, 1<<1) // -Gres +Steps
	if !strings.Contains(out.String(), "Set DebugFlags to Protocol,Steps") {
		t.Errorf("log:\n%s", out)
	}
	d.SetDebugFlags(1<<26|1<<1, 0)
	if !strings.Contains(out.String(), "Set DebugFlags to none") {
		t.Errorf("log:\n%s", out)
	}
	d.resetDebug()
	if got := d.debugLevel(); got != uint16(slurmconf.LogInfo)+1 {
		t.Errorf("level after a reconfigure: %d", got)
	}
}
