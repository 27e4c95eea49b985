package cgroup

import "fmt"

// DeviceRule is one device file a job, step or task may or may not open
// (task/cgroup's ConstrainDevices: every GRES device of the node gets a
// rule; devices outside GRES are left alone).
type DeviceRule struct {
	Block        bool // 'b' rather than 'c'
	Major, Minor uint32
	Allow        bool
}

// String is the v1 devices.allow / devices.deny form: "c 195:0 rwm".
func (r DeviceRule) String() string {
	t := 'c'
	if r.Block {
		t = 'b'
	}
	return fmt.Sprintf("%c %d:%d rwm", t, r.Major, r.Minor)
}

// DeviceManager confines steps to their devices: a job level, a step
// level below it and, per task, a task level below that, each with its own
// rules (a level can only narrow its parent's).
type DeviceManager interface {
	// Kind is KindV1 or KindV2.
	Kind() string
	// Confine creates (or opens) the job and step levels and applies
	// their rules.
	Confine(job uint32, step string, jobRules, stepRules []DeviceRule) (DeviceCgroup, error)
}

// DeviceCgroup is one step's device confinement.
type DeviceCgroup interface {
	// AddTask creates task level task (its rules; nil: the step's) and
	// moves pid into it; call it before the task execs.
	AddTask(task int, pid int, rules []DeviceRule) error
	// Remove deletes the task and step levels, and the job's when no step
	// is left. Processes must be gone.
	Remove() error
}
