package stepd

import (
	"github.com/tiee-hpc/tiee/slurmd-go/internal/cgroup"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gresbind"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// stepGres is what the step binds of its credential's GRES.
type stepGres struct {
	node   *gresbind.Node
	launch *gresbind.Launch
	devs   cgroup.DeviceCgroup // nil: devices not confined
}

// initGres decodes the credential's GRES lists against the node's GRES
// (slurmstepd_job.c: get_cred_gres at the job's host index). A node with no
// GRES plugin, or a credential that cannot be read, leaves s.gres nil: no
// GRES variable is then touched, as a stock node without gres plugins.
func (s *Step) initGres(c *slurmproto.Cred, tresBind string, accel uint16) {
	if len(s.spec.GresTypes) == 0 || c == nil {
		return
	}
	node, err := gresbind.NewNode(s.spec.GresRecords, s.spec.GresTypes, s.spec.ProtocolVersion, s.spec.ConstrainDevices, nil)
	if err != nil {
		// Stock logs the device file it could not use and goes on.
		s.log.Error("gres devices", "error", err)
	}
	if len(node.Plugins) == 0 {
		return
	}
	v := s.spec.ProtocolVersion
	job, err := c.JobGres(v)
	if err != nil {
		s.log.Error("credential gres job state", "error", err)
		return
	}
	step, err := c.StepGres(v)
	if err != nil {
		s.log.Error("credential gres step state", "error", err)
		return
	}
	idx := -1
	if hl, err := hostlist.Parse(slurmproto.CString(c.JobHostlist)); err == nil {
		idx = hl.Find(s.spec.NodeName)
	}
	if idx < 0 {
		// get_cred_gres: "Invalid host_index": the step gets no GRES.
		s.log.Error("node not in the credential's host list", "node", s.spec.NodeName, "hostlist", c.JobHostlist)
		job, step = nil, nil
		idx = 0
	}
	s.gres = &stepGres{node: node, launch: &gresbind.Launch{
		Job: job, Step: step, NodeIndex: idx, TresBind: slurmproto.CString(tresBind), AccelBindType: accel,
	}}
}

// confineDevices creates the step's device cgroup (task/cgroup with
// ConstrainDevices=yes): the job's devices at the job level, the step's
// below it. A batch step follows the job's allocation.
func (s *Step) confineDevices(batch bool) {
	g := s.gres
	if g == nil || !s.spec.ConstrainDevices || s.spec.NoCgroup {
		return
	}
	m, err := s.opts.deviceManager(s.cgroupRoot())
	if err != nil {
		s.log.Warn("devices not confined", "error", err)
		return
	}
	stepScope := gresbind.ScopeStep
	if batch {
		stepScope = gresbind.ScopeJob
	}
	dc, err := m.Confine(s.id.JobID, s.stepName(),
		deviceRules(g.node.Devices(g.launch, gresbind.ScopeJob, 0)),
		deviceRules(g.node.Devices(g.launch, stepScope, 0)))
	if err != nil {
		s.log.Error("device cgroup", "error", err)
		return
	}
	g.devs = dc
}

// addTaskDevices puts a forked task in its task-level device cgroup:
// narrowed by --gpu-bind / --gpus-per-task for srun tasks.
func (s *Step) addTaskDevices(localID, pid int, batch bool) error {
	g := s.gres
	if g == nil || g.devs == nil {
		return nil
	}
	var rules []cgroup.DeviceRule
	switch {
	case batch:
		rules = deviceRules(g.node.Devices(g.launch, gresbind.ScopeJob, 0))
	default:
		rules = deviceRules(g.node.Devices(g.launch, gresbind.ScopeTask, localID))
	}
	return g.devs.AddTask(localID, pid, rules)
}

// removeDevices removes the device cgroup once the step's processes are gone.
func (s *Step) removeDevices() {
	if s.gres == nil || s.gres.devs == nil {
		return
	}
	if err := s.gres.devs.Remove(); err != nil {
		s.log.Warn("device cgroup removal", "error", err)
	}
}

func deviceRules(rs []gresbind.DeviceRule) []cgroup.DeviceRule {
	out := make([]cgroup.DeviceRule, len(rs))
	for i, r := range rs {
		out[i] = cgroup.DeviceRule{Block: r.Dev.String() == "b", Major: r.Major, Minor: r.Minor, Allow: r.Allow}
	}
	return out
}

// cgroupRoot is the directory job cgroups go under.
func (s *Step) cgroupRoot() string {
	if s.spec.CgroupRoot != "" {
		return s.spec.CgroupRoot
	}
	return "tiee/" + s.spec.NodeName
}
