package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/clusterauth"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Configless start (--conf-server, or $SLURM_CONF_SERVER as stock reads
// it): the daemon asks slurmctld for its files (REQUEST_CONFIG), keeps
// them in <SlurmdSpoolDir>/conf-cache and reads slurm.conf from there;
// every reconfigure pushes them again (REQUEST_RECONFIGURE_WITH_CONFIG).
const (
	// ConfFetchTimeout bounds the fetch at start; a pod started before
	// its slurmctld waits this long rather than failing at once.
	ConfFetchTimeout = 2 * time.Minute
	// ConfFetchRetry is the pause between two tries.
	ConfFetchRetry = 5 * time.Second
	// confFetchMessageTimeout bounds one exchange: there is no
	// MessageTimeout before slurm.conf.
	confFetchMessageTimeout = 10 * time.Second
	// ConfCacheDir is the cache's name under SlurmdSpoolDir.
	ConfCacheDir = "conf-cache"
	// RunConfLink lets clients on the node (srun in a job) find the cache,
	// as stock's /run/slurm/conf.
	RunConfLink = "/run/slurm/conf"
)

// confServer is the configless server list, "" when slurm.conf is local.
func confServer(f config.Flags) string {
	if f.ConfServer != "" {
		return f.ConfServer
	}
	return os.Getenv("SLURM_CONF_SERVER")
}

// ctldHostsFrom parses "host[:port][,host[:port]...]" (default port 6817).
func ctldHostsFrom(server string) ([]string, error) {
	var hosts []string
	for _, h := range strings.Split(server, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "6817")
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("daemon: --conf-server %q names no slurmctld", server)
	}
	return hosts, nil
}

// fetchConfig fetches the configuration and points f at the cached
// slurm.conf.
func fetchConfig(ctx context.Context, f *config.Flags, stderr io.Writer) error {
	server := confServer(*f)
	hosts, err := ctldHostsFrom(server)
	if err != nil {
		return err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "slurmd-go.configless", Output: stderr})
	// As stock's fetch: auth/slurm if its key is where auth/slurm looks
	// ($SLURM_SACK_KEY, else beside $SLURM_CONF or the default
	// slurm.conf), else munge with its default socket.
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = config.DefaultConfFile
	}
	o := clusterauth.Options{AuthType: clusterauth.Munge, ConfFile: conf, Logger: log}
	key, jwks := authslurm.KeyPaths(conf, nil) // $SLURM_SACK_KEY and _JWKS too
	for _, k := range []string{jwks, key} {
		if _, err := os.Stat(k); err == nil {
			o.AuthType = clusterauth.Slurm
		}
	}
	var c *ctld.Client
	o.Version = func() uint16 { return c.Version() }
	a, err := clusterauth.New(o)
	if err != nil {
		return err
	}
	c = ctld.New(a, func() ctld.Config { return ctld.Config{Hosts: hosts, MessageTimeout: confFetchMessageTimeout} }, log)
	ctx, cancel := context.WithTimeout(ctx, ConfFetchTimeout)
	defer cancel()
	var resp *slurmproto.ConfigResponse
	for {
		resp, err = askConfig(ctx, c)
		if err == nil {
			break
		}
		var rc *ctld.RCError
		if errors.As(err, &rc) {
			return fmt.Errorf("daemon: configless: %s refused: %w (slurmctld needs SlurmctldParameters=enable_configless)", server, err)
		}
		log.Warn("fetching the configuration failed, retrying", "conf_server", server, "error", err, "in", ConfFetchRetry.String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon: configless: no configuration from %s within %v: %w", server, ConfFetchTimeout, err)
		case <-time.After(ConfFetchRetry):
		}
	}
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	node := f.NodeName
	if node == "" {
		node = host // no node table yet: stock has the same limit
	}
	cache := filepath.Join(slurmconf.ExpandPath(resp.SpoolDir, node, host), ConfCacheDir)
	if err := WriteConfCache(cache, resp.Files); err != nil {
		return err
	}
	f.ConfFile, f.ConfFileSet = filepath.Join(cache, "slurm.conf"), true
	// Step managers and the plugins' own files follow SLURM_CONF.
	os.Setenv("SLURM_CONF", f.ConfFile)
	if err := os.MkdirAll(filepath.Dir(RunConfLink), 0o755); err == nil {
		os.Remove(RunConfLink)
		if err := os.Symlink(cache, RunConfLink); err != nil {
			log.Warn("no "+RunConfLink+" link", "error", err)
		}
	}
	log.Info("configuration fetched", "conf_server", server, "files", len(resp.Files), "cache", cache,
		"release", slurmproto.ReleaseName(c.Version()))
	return nil
}

func askConfig(ctx context.Context, c *ctld.Client) (*slurmproto.ConfigResponse, error) {
	reply, err := c.Call(ctx, slurmproto.ConfigRequest{Flags: slurmproto.ConfigRequestSlurmd}, auth.UIDAny)
	if err != nil {
		return nil, err
	}
	switch r := reply.(type) {
	case *slurmproto.ConfigResponse:
		for _, f := range r.Files {
			if f.Name == "slurm.conf" && f.Exists {
				return r, nil
			}
		}
		return nil, fmt.Errorf("daemon: configless: slurmctld sent no slurm.conf")
	case *slurmproto.ReturnCode:
		return nil, &ctld.RCError{RC: r.RC}
	}
	return nil, fmt.Errorf("daemon: configless: unexpected reply %v", reply.MsgType())
}

// WriteConfCache writes files into dir as stock's conf-cache: each
// replaced atomically, a script executable, a file slurmctld no longer
// has removed. A name with a path separator is refused: slurmctld names
// files of its own directory only.
func WriteConfCache(dir string, files []slurmproto.ConfigFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("daemon: conf-cache: %w", err)
	}
	for _, f := range files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return fmt.Errorf("daemon: conf-cache: slurmctld sent a file named %q", f.Name)
		}
		path := filepath.Join(dir, f.Name)
		if !f.Exists {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("daemon: conf-cache: %w", err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if f.Execute {
			mode = 0o755
		}
		content := f.Content
		if content == slurmproto.EmptyString {
			content = ""
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
			return fmt.Errorf("daemon: conf-cache: %w", err)
		}
		if err := os.Chmod(tmp, mode); err != nil { // umask
			return fmt.Errorf("daemon: conf-cache: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("daemon: conf-cache: %w", err)
		}
	}
	return nil
}
