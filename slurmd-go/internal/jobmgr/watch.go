package jobmgr

import (
	"path/filepath"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/gresbind"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// StepWatcher learns of the steps launched on this node with the GPUs each
// was given, and of jobs ending here: the metrics' job registry, which
// labels each GPU's series with the job holding it. Called after a
// successful launch, on the launching goroutine; must not block.
type StepWatcher interface {
	// StepLaunched: gpus are the minor numbers (/dev/nvidia<minor>) of
	// the step's GPUs; the batch step holds the job's.
	StepLaunched(jobID, stepID uint32, user string, gpus []int)
	JobEnded(jobID uint32)
}

// gresStat reads device numbers (tests replace it; nil: the device files).
var gresStat gres.StatFunc

// SetStepWatcher installs w; before the daemon serves.
func (m *Manager) SetStepWatcher(w StepWatcher) { m.watcher = w }

// watchLaunch tells the watcher of a launched step. batch: the step holds
// the job's allocation (the batch step, as its device cgroup does).
func (m *Manager) watchLaunch(version uint16, c *slurmproto.Cred, step slurmproto.StepID, user string, batch bool) {
	if m.watcher == nil {
		return
	}
	m.watcher.StepLaunched(step.JobID, step.StepID, user, m.credGPUs(version, c, batch))
}

// credGPUs are the minor numbers of the GPUs the credential gives this
// node: the step's (or, for batch, the job's) gres/gpu and gres/shard
// devices, decoded against the node's GRES records as the step manager
// decodes them.
func (m *Manager) credGPUs(version uint16, c *slurmproto.Cred, batch bool) []int {
	recs := m.nodeGres()
	cfg := m.cfg()
	if c == nil || len(recs) == 0 || len(cfg.Conf.GresTypes) == 0 {
		return nil
	}
	// A device file that cannot be read is the step manager's to report.
	node, _ := gresbind.NewNode(recs, cfg.Conf.GresTypes, version, false, gresStat)
	if node == nil || len(node.Plugins) == 0 {
		return nil
	}
	job, err := c.JobGres(version)
	if err != nil {
		return nil
	}
	st, err := c.StepGres(version)
	if err != nil {
		return nil
	}
	hl, err := hostlist.Parse(slurmproto.CString(c.JobHostlist))
	if err != nil {
		return nil
	}
	idx := hl.Find(cfg.NodeName)
	if idx < 0 {
		return nil
	}
	scope := gresbind.ScopeStep
	if batch {
		scope = gresbind.ScopeJob
	}
	var out []int
	for _, d := range node.Devices(&gresbind.Launch{Job: job, Step: st, NodeIndex: idx}, scope, 0) {
		// nvidia<minor> (gres.conf's File, /dev/nvidia3 on a real node);
		// not nvidiactl, nvidia-uvm, nvidia-caps/…
		if b := filepath.Base(d.Path); d.Allow && strings.HasPrefix(b, "nvidia") && isDigits(b[len("nvidia"):]) {
			out = append(out, d.DevNum)
		}
	}
	return out
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
