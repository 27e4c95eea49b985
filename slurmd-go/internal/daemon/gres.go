package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/hostinfo"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// GresLoadTimeout bounds one GRES load: stock waits up to 20 s for each
// missing File= of gres.conf; more than that is a hung detector.
const GresLoadTimeout = 2 * gres.DefaultFileWait

// gresState caches the node's GRES per configuration and release: they
// are loaded at start (a broken gres.conf stops the daemon, as stock) and
// again when slurm.conf is re-read or the release changes.
type gresState struct {
	mu       sync.Mutex
	detector gres.Detector  // AutoDetect=; nil is gres.NullDetector (guarded by mu)
	cfg      *config.Config // what node was loaded for (guarded by mu)
	v        uint16
	node     *gres.Node
}

// newGPUDetector makes the AutoDetect= detector of a daemon and of -G:
// internal/gpu over NVML, opened at the first AutoDetect=nvml (on a node
// without the library, gres.ErrNoLibrary says why).
var newGPUDetector = func() gres.Detector { return gpu.NewLazy(gpu.Options{}) }

// SetGPUDetector installs the AutoDetect= detector (internal/gpu); call
// before the daemon runs.
func (d *Daemon) SetGPUDetector(det gres.Detector) {
	d.gres.mu.Lock()
	defer d.gres.mu.Unlock()
	d.gres.detector = det
	d.gres.cfg = nil
}

// gresConfPath is gres.conf beside slurm.conf (get_extra_conf_path).
func gresConfPath(cfg *config.Config) string {
	return filepath.Join(filepath.Dir(cfg.Conf.File), "gres.conf")
}

// gresOptions are gres.Load's inputs for this node under release v.
func gresOptions(cfg *config.Config, cpus uint16, v uint16, det gres.Detector) gres.Options {
	n := uint32(cpus)
	if cfg.Node != nil && uint32(cfg.Node.CPUs) > n {
		n = uint32(cfg.Node.CPUs) // MAX(conf_cpus, block_map_size)
	}
	if r, ok := det.(interface{ WithRelease(uint16) gres.Detector }); ok {
		det = r.WithRelease(v) // the gpu plugin of release v names the GPUs
	}
	o := gres.Options{ConfPath: gresConfPath(cfg), NodeName: cfg.NodeName, CPUs: n, Version: v,
		GresTypes: cfg.Conf.GresTypes, Detector: det}
	if cfg.Node != nil {
		o.NodeGres = cfg.Node.Gres
	}
	return o
}

// gresRelease is the release GRES are read as: the controller's, else the
// one slurm.conf was read as, else the newest spoken.
func (d *Daemon) gresRelease() uint16 {
	if d.ctld != nil {
		if v := d.ctld.Version(); v != 0 {
			return v
		}
	}
	if v := d.config().Conf.Version; v != 0 {
		return v
	}
	return slurmproto.Spoken()[0]
}

// loadGres (re)loads the node's GRES for release v unless they are loaded
// for the running configuration already.
func (d *Daemon) loadGres(ctx context.Context, v uint16) (*gres.Node, error) {
	cfg := d.config()
	d.gres.mu.Lock()
	defer d.gres.mu.Unlock()
	if d.gres.node != nil && d.gres.cfg == cfg && d.gres.v == v {
		return d.gres.node, nil
	}
	ctx, cancel := context.WithTimeout(ctx, GresLoadTimeout)
	defer cancel()
	o := gresOptions(cfg, d.hardware().CPUs, v, d.gres.detector)
	o.Logger = d.log.Named("gres")
	n, err := gres.Load(ctx, o)
	log := d.log.Named("gres")
	if n != nil {
		for _, m := range n.Messages {
			switch m.Level {
			case "error":
				log.Error(m.Text)
			case "warning":
				log.Warn(m.Text)
			case "info":
				log.Info(m.Text)
			default:
				log.Debug(m.Text)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: gres: %w", err)
	}
	for _, r := range n.Records {
		log.Debug("gres", "name", r.Name, "type", r.Type, "count", r.Count, "file", r.File, "cores", r.Cores, "links", r.Links)
	}
	d.gres.cfg, d.gres.v, d.gres.node = cfg, v, n
	return n, nil
}

// gresRecords are the node's GRES records that step managers bind
// credentials to (none while gres.conf is broken).
func (d *Daemon) gresRecords() []gres.Record {
	n, err := d.loadGres(context.Background(), d.gresRelease())
	if err != nil {
		return nil
	}
	return n.Records
}

// gresInfo is the registration's gres_info for release v
// (gres_node_config_pack). A gres.conf broken since the start is logged and
// registers no GRES.
func (d *Daemon) gresInfo(v uint16) []byte {
	n, err := d.loadGres(context.Background(), v)
	if err != nil {
		d.log.Error("registering without GRES", "error", err)
		return slurmproto.PackGresNodeConfig(v, nil)
	}
	return slurmproto.PackGresNodeConfig(v, gresWire(n.Records, v))
}

// gresWire maps records to the wire records of release v.
func gresWire(recs []gres.Record, v uint16) []slurmproto.GresConfRecord {
	out := make([]slurmproto.GresConfRecord, len(recs))
	for i, r := range recs {
		out[i] = slurmproto.GresConfRecord{Count: r.Count, CPUCnt: r.CPUCnt, ConfigFlags: r.Flags.Bits(v),
			PluginID: gres.PluginID(r.Name), CPUs: r.Cores, Links: r.Links, Name: r.Name, Type: r.Type, UniqueID: r.UniqueID}
	}
	return out
}

// gresPrintRelease is the release `slurmd-go -G` prints as: the pinned
// one, else the one an earlier daemon negotiated (saved in the spool
// directory), else the newest.
func gresPrintRelease(cfg *config.Config) uint16 {
	if v, err := pinnedRelease(); err == nil && v != 0 {
		return v
	}
	if b, err := os.ReadFile(filepath.Join(cfg.SpoolDir, protocolFile)); err == nil {
		if v, err := slurmproto.ParseRelease(strings.TrimSpace(string(b))); err == nil && slurmproto.Speaks(v) {
			return v
		}
	}
	return slurmproto.Spoken()[0]
}

// printGres is `slurmd -G`: the node's GRES as stock prints them on stderr
// (they are log lines; DebugFlags=Gres makes them visible), with the log
// prefix of the release: "slurmd-<node>: " (22.05, 24.11) or
// "[<time>] " (26.05). A broken gres.conf prints its fatal line, exit 1.
func printGres(w io.Writer, cfg *config.Config, det gres.Detector) int {
	v := gresPrintRelease(cfg)
	if cfg.Conf.Version != 0 && cfg.Conf.Version != v {
		c, err := config.LoadAs(cfg.Flags, v)
		if err != nil {
			printConfError(w, err)
			return 1
		}
		cfg = c
	}
	hw, err := hostinfo.Probe(cfg.TmpFS)
	if err != nil {
		fmt.Fprintf(w, "slurmd-go: fatal: probe hardware: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), GresLoadTimeout)
	defer cancel()
	n, err := gres.Load(ctx, gresOptions(cfg, hw.CPUs, v, det))
	prefix := func() string {
		if v >= slurmproto.Version2605 {
			return "[" + time.Now().Format("2006-01-02T15:04:05.000") + "] "
		}
		return "slurmd-" + cfg.NodeName + ": "
	}
	debugGres := false
	for _, f := range strings.Split(cfg.Conf.DebugFlags, ",") {
		if strings.EqualFold(strings.TrimSpace(f), "Gres") {
			debugGres = true
		}
	}
	lines := gres.PrintLines(n, err)
	if err == nil && !debugGres {
		// Without DebugFlags=Gres the records are logged at verbose, which
		// -G does not show: only the messages are printed.
		lines = gres.PrintLines(&gres.Node{Messages: n.Messages}, nil)
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s%s\n", prefix(), l)
	}
	if err != nil {
		return 1
	}
	return 0
}
