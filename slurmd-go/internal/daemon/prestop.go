package daemon

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/clusterauth"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// PreStop is `slurmd-go prestop [daemon flags]`, a pod's preStop hook:
// it drains the pod's node with PodDeletedReason before the pod goes, so
// that slurmctld sends it no new job, and keeps any drain already there.
// The next daemon on the node lifts it (syncDrain). The node is -N, else
// $K8S_NODE_NAME (the kubelet expands no $(VAR) in a hook's command).
func PreStop(ctx context.Context, args []string, stderr io.Writer) int {
	f, err := config.ParseFlags("slurmd-go prestop", args)
	if err != nil {
		fmt.Fprintf(stderr, "slurmd-go prestop: %v\n", err)
		return 2
	}
	if f.NodeName == "" {
		f.NodeName = os.Getenv("K8S_NODE_NAME")
	}
	cfg, err := config.LoadAs(f, startRelease())
	if err != nil {
		fmt.Fprintf(stderr, "slurmd-go prestop: %v\n", err)
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "slurmd-go.prestop", Output: stderr})
	var c *ctld.Client
	a, err := clusterauth.New(authOptions(cfg, log, func() uint16 { return c.Version() }))
	if err != nil {
		log.Error("auth", "error", err)
		return 1
	}
	c = ctld.New(a, func() ctld.Config {
		return ctld.Config{Hosts: cfg.CtldHosts, MessageTimeout: cfg.MessageTimeout(), HashPolicy: cfg.HashPolicy()}
	}, log)
	ctx, cancel := context.WithTimeout(ctx, K8sDrainTimeout)
	defer cancel()
	r, err := c.Node(ctx, cfg.NodeName)
	if err != nil {
		log.Error("reading the node failed; not drained", "node", cfg.NodeName, "error", err)
		return 1
	}
	if r.NodeState&slurmproto.NodeStateDrain != 0 {
		log.Info("the node is already drained, its reason is kept", "node", cfg.NodeName, "reason", r.Reason)
		return 0
	}
	if err := c.Drain(ctx, cfg.NodeName, PodDeletedReason); err != nil {
		log.Error("draining the node failed", "node", cfg.NodeName, "error", err)
		return 1
	}
	log.Info("node drained before the pod goes", "node", cfg.NodeName, "reason", PodDeletedReason)
	return 0
}
