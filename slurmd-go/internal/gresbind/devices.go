package gresbind

import "github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"

// DeviceRule is one GRES device file of the node and whether a cgroup may
// open it (task/cgroup writes an allow or a deny rule for each).
type DeviceRule struct {
	gres.Device
	Allow bool
}

// Scope is which allocation a device cgroup follows.
type Scope int

// Scopes of task_cgroup_devices.c: the job's cgroup, the step's, and one
// task's (the step's devices narrowed by --gpu-bind / --gpus-per-task).
const (
	ScopeJob Scope = iota
	ScopeStep
	ScopeTask
)

// Devices is gres_g_get_devices: every device file of the node's GRES
// plugins (one entry per path; gpu and shard share files), each allowed
// when the scope's allocation holds it. localID is the task's index on this
// node for ScopeTask.
func (n *Node) Devices(l *Launch, scope Scope, localID int) []DeviceRule {
	var rules []DeviceRule
	byPath := map[string]int{}
	for _, p := range n.Plugins {
		for _, d := range p.Devices {
			if _, ok := byPath[d.Path]; ok {
				continue
			}
			byPath[d.Path] = len(rules)
			rules = append(rules, DeviceRule{Device: d})
		}
	}
	for i := range n.Plugins {
		p := &n.Plugins[i]
		var a alloc
		if scope == ScopeJob {
			a = jobAlloc(l.Job, l.NodeIndex, p.ID)
		} else {
			a = stepAlloc(l.Step, l.NodeIndex, p.ID)
		}
		if a.bits == nil {
			continue
		}
		var usable bits
		if scope == ScopeTask {
			var ok bool
			if usable, ok = n.usable(p, localID, l, a, true); !ok {
				continue
			}
		}
		for _, d := range p.Devices {
			if !a.bits.test(d.Index) {
				continue
			}
			if usable == nil || usable.test(d.Index) {
				rules[byPath[d.Path]].Allow = true
			}
		}
	}
	return rules
}
