package daemon

import (
	"fmt"
	"io"
	"os"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/cgroup"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/privcheck"
)

// checkPrivileges fails a root daemon that lacks a privilege its jobs
// need (a pod with too few capabilities, a read-only cgroup hierarchy),
// naming each, and warns of those whose lack only degrades a feature.
// Stock slurmd finds out at the first job; a pod should fail at start.
func checkPrivileges(w io.Writer, cfg *config.Config) error {
	if os.Geteuid() != 0 {
		return nil // a non-root SlurmdUser runs its own jobs only
	}
	eff, err := privcheck.Effective()
	if err != nil {
		fmt.Fprintf(w, "slurmd-go: warning: %v; privileges not checked\n", err)
		return nil
	}
	req, opt := privcheck.Missing(eff, privcheck.Needs(cfg.Conf))
	for _, n := range opt {
		fmt.Fprintf(w, "slurmd-go: warning: without %s slurmd-go cannot %s\n", n.Name, n.For)
	}
	if privcheck.UsesCgroup(cfg.Conf) {
		if h, err := cgroup.Mounts(""); err == nil {
			req = append(req, privcheck.Writable(h.Used())...)
		}
	}
	if len(req) > 0 {
		return &privcheck.Error{Missing: req}
	}
	return nil
}
