package daemon

import (
	"github.com/tiee-hpc/tiee/slurmd-go/internal/logging"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// debugOverride is what REQUEST_SET_DEBUG_LEVEL/FLAGS changed since
// slurm.conf was last read. A reconfigure forgets it: 24.11 and later
// reconfigure by re-executing slurmd, which starts from slurm.conf and the
// command line again.
type debugOverride struct {
	level    int // Slurm level number; -1: SlurmdDebug and -v
	flags    uint64
	flagsSet bool
}

// SetDebugLevel implements handlers.Node, as update_slurmd_logging: the
// level replaces SlurmdDebug and the -v count.
func (d *Daemon) SetDebugLevel(level uint32) {
	d.debugMu.Lock()
	d.debug.level = int(level)
	d.debugMu.Unlock()
	d.log.SetLevel(logging.Level(int(level), 0))
	if d.jobs != nil {
		d.jobs.SetLogLevel(int(level))
	}
	d.log.Info("debug level set", "level", level)
}

// SetDebugFlags implements handlers.Node with stock's log line.
func (d *Daemon) SetDebugFlags(minus, plus uint64) {
	cfg := d.config()
	d.debugMu.Lock()
	if !d.debug.flagsSet {
		d.debug.flags = slurmconf.DebugFlagBits(cfg.Conf.Version, cfg.Conf.DebugFlags)
		d.debug.flagsSet = true
	}
	d.debug.flags = d.debug.flags&^minus | plus
	flags := d.debug.flags
	d.debugMu.Unlock()
	s := slurmconf.DebugFlagString(cfg.Conf.Version, flags)
	if s == "" {
		s = "none"
	}
	d.log.Info("Set DebugFlags to " + s)
}

// debugLevel is the level `scontrol show slurmd` reports.
func (d *Daemon) debugLevel() uint16 {
	d.debugMu.Lock()
	defer d.debugMu.Unlock()
	if d.debug.level >= 0 {
		return uint16(d.debug.level)
	}
	cfg := d.config()
	return uint16(cfg.Conf.SlurmdDebug) + uint16(cfg.Flags.Verbose)
}

// resetDebug forgets the overrides (a reconfigure).
func (d *Daemon) resetDebug() {
	d.debugMu.Lock()
	d.debug = debugOverride{level: -1}
	d.debugMu.Unlock()
	if d.jobs != nil {
		d.jobs.SetLogLevel(-1)
	}
}
