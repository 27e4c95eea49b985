package daemon

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
)

// gpuHealthFile, in SlurmdSpoolDir, keeps the drain reason GPU health set,
// so that a restarted daemon lifts its own drain and no other.
const gpuHealthFile = "gpu_health_drain"

// startGPUHealth watches the GPUs NVML manages (gres.conf AutoDetect=nvml)
// and drains the node with a "gpu: " reason on a fault, until ctx ends. A
// node without NVML gets the Null provider, whose stream just ends.
func (d *Daemon) startGPUHealth(ctx context.Context, cfg *config.Config, n *gres.Node) {
	if n == nil || n.AutoDetect != gres.AutoDetectNVML {
		return
	}
	d.gres.mu.Lock()
	l, ok := d.gres.detector.(interface{ Provider() gpu.Provider })
	d.gres.mu.Unlock()
	if !ok {
		return
	}
	hc := gpu.HealthConfig{
		Drainer:   nodeDrainer{d},
		StatePath: filepath.Join(cfg.SpoolDir, gpuHealthFile),
		Logger:    d.log,
	}
	go func() {
		if err := gpu.RunHealth(ctx, l.Provider(), hc); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error("GPU health watch stopped: GPU faults no longer drain this node", "error", err)
		}
	}()
}

// nodeDrainer drains and resumes this node at slurmctld (gpu.Drainer).
type nodeDrainer struct{ d *Daemon }

func (n nodeDrainer) Drain(ctx context.Context, reason string) error {
	return n.d.ctld.Drain(ctx, n.d.config().NodeName, reason)
}

// Resume lifts the drain only while slurmctld still holds it with the
// reason health set: an administrator's drain, or a reason changed since,
// stays.
func (n nodeDrainer) Resume(ctx context.Context, reason string) error {
	node := n.d.config().NodeName
	ok, err := n.d.ctld.ResumeIfReason(ctx, node, reason)
	if err != nil {
		return err
	}
	if !ok {
		n.d.log.Info("GPU faults cleared; the node's drain is not the one GPU health set, so it stays", "reason", reason)
	}
	return nil
}

var _ gpu.Drainer = nodeDrainer{}
