package daemon

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/topoapi"
)

// startTopology serves the local topology API (internal/topoapi) in the
// spool directory, for the tiee_topology SPANK plugin. Jobs run without
// it, so a failure is logged and nil returned. It answers from the
// running configuration, so a reconfigure needs no restart.
func (d *Daemon) startTopology(ctx context.Context, cfg *config.Config) *topoapi.Server {
	path := filepath.Join(cfg.SpoolDir, topoapi.SocketName)
	log := d.log.Named("topoapi")
	ln, err := topoapi.Listen(path)
	if err != nil {
		log.Error("topology API not served; the tiee_topology plugin cannot check zones", "error", err)
		return nil
	}
	srv := topoapi.NewServer(&topoapi.ConfSource{Config: d.config, Log: log}, d.log)
	// Not ended by ctx: run shuts it down after stop, as the SACK server.
	go func() {
		if err := srv.Serve(context.WithoutCancel(ctx), ln); err != nil && !errors.Is(err, topoapi.ErrServerClosed) {
			log.Error("topology API stopped", "error", err)
		}
	}()
	log.Debug("serving the topology API", "socket", path)
	return srv
}
