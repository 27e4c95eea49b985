package daemon

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// printConfError writes a configuration error the way stock slurmd logs it
// at start ("error: <cause>", then "fatal: Unable to process configuration
// file"), the cause located as file:line.
func printConfError(w io.Writer, err error) {
	var pe *slurmconf.ParseError
	if !errors.As(err, &pe) {
		fmt.Fprintf(w, "slurmd-go: fatal: %v\n", err)
		return
	}
	for i, l := range pe.Lines() {
		if i == 0 {
			level, _, _ := strings.Cut(l, ": ")
			l = level + ": " + pe.Error()
		}
		fmt.Fprintf(w, "slurmd-go: %s\n", l)
	}
}

// printConfWarnings writes what slurmd logs about slurm.conf and
// cgroup.conf and carries on (defunct keys, values it resets).
func printConfWarnings(w io.Writer, cfg *config.Config) {
	for _, x := range confWarnings(cfg) {
		fmt.Fprintf(w, "slurmd-go: %s: %s:%d: %s\n", x.Level, x.File, x.Line, x.Msg)
	}
}

// logConfWarnings is printConfWarnings for a reconfigure, into the log.
func logConfWarnings(log hclog.Logger, cfg *config.Config) {
	for _, x := range confWarnings(cfg) {
		switch x.Level {
		case "error":
			log.Error(x.Msg, "file", x.File, "line", x.Line)
		case "warning":
			log.Warn(x.Msg, "file", x.File, "line", x.Line)
		default:
			log.Info(x.Msg, "file", x.File, "line", x.Line)
		}
	}
}

func confWarnings(cfg *config.Config) []slurmconf.Warning {
	ws := append([]slurmconf.Warning(nil), cfg.Conf.Warnings...)
	if cfg.Cgroup != nil {
		ws = append(ws, cfg.Cgroup.Warnings...)
	}
	for _, msg := range unprovided(cfg.Conf) {
		ws = append(ws, slurmconf.Warning{File: cfg.Conf.File, Level: "warning", Msg: msg})
	}
	return ws
}

// unprovided names what slurm.conf turns on that slurmd-go does not do
// (rfc/compat.md): said once at start and at each reconfigure, so that a
// feature missing on the node is never silent.
func unprovided(c *slurmconf.Config) []string {
	var out []string
	if c.PrologFlags&slurmconf.PrologX11 != 0 {
		out = append(out, "PrologFlags=X11: slurmd-go does not forward X11; srun --x11 launches are refused")
	}
	for _, p := range strings.Split(c.SlurmctldParameters, ",") {
		if strings.TrimSpace(p) == "enable_stepmgr" {
			out = append(out, "SlurmctldParameters=enable_stepmgr: slurmd-go does not serve step management; every job whose first node this is gets cancelled with that reason")
		}
	}
	if strings.Contains(c.TaskPlugin, "affinity") {
		out = append(out, "TaskPlugin="+c.TaskPlugin+": slurmd-go has no task/affinity; --cpu-bind and --mem-bind are not applied")
	}
	return out
}
