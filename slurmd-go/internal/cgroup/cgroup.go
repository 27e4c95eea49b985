// Package cgroup confines a job step's processes in a cgroup so that none
// escapes a kill and the credential's memory limit is enforced. It speaks
// cgroup v2 (the production target) and v1 (freezer, memory and pids
// controllers, as on hybrid hosts), picked by probing the mounts, and is a
// no-op elsewhere. It imports only the standard library and x/sys.
//
// Layout, under each hierarchy's mount point (v2: the unified mount; v1:
// each controller's mount):
//
//	<mount>/<root>/job_<jobid>/step_<step>     e.g. .../tiee/n1/job_7/step_batch
//
// The memory limit is set on job_<jobid>; processes live in step_<step>.
// The step manager itself stays outside, so killing the step cgroup never
// kills it.
package cgroup

import (
	"errors"
	"syscall"
)

// ErrNotSupported is returned for operations the hierarchy cannot do here
// (no memory controller, no cgroups at all).
var ErrNotSupported = errors.New("cgroup: not supported")

// Kinds of Manager.
const (
	KindV2   = "v2"
	KindV1   = "v1"
	KindNone = "none"
)

// Manager creates step cgroups. Implementations are safe for concurrent use.
type Manager interface {
	// Kind is KindV2, KindV1 or KindNone.
	Kind() string
	// Create makes the cgroup of step (e.g. "batch", "extern", "0") of
	// job, or opens it if it exists.
	Create(job uint32, step string) (Cgroup, error)
}

// Cgroup is one step's cgroup. Methods are safe for concurrent use.
type Cgroup interface {
	// Path is the step cgroup's directory (in the tracking hierarchy).
	Path() string
	// AddPID moves pid (a whole process) into the step cgroup.
	AddPID(pid int) error
	// SetMemoryLimit limits the job's memory (RAM) to bytes; it wraps
	// ErrNotSupported when no memory controller is available.
	SetMemoryLimit(bytes uint64) error
	// PIDs lists the processes in the step cgroup (and below it).
	PIDs() ([]int, error)
	// HasPID reports whether pid is in the step cgroup.
	HasPID(pid int) (bool, error)
	// Signal sends sig to every process in the step cgroup.
	Signal(sig syscall.Signal) error
	// Kill sends SIGKILL to every process without a race against forks
	// (cgroup.kill, or freeze-kill-thaw). Processes may take a moment to
	// disappear; poll PIDs.
	Kill() error
	// Freeze stops every process; Thaw resumes them.
	Freeze() error
	Thaw() error
	// OOMKills is how many processes the kernel OOM-killed in the job.
	OOMKills() (uint64, error)
	// Remove deletes the step cgroup, and the job's when no step is left.
	// It fails while processes remain.
	Remove() error
}

// Options select where job cgroups go.
type Options struct {
	// Root is the directory under each mount point ("" = "tiee").
	Root string
	// Mountinfo is the mountinfo file to probe ("" = /proc/self/mountinfo).
	Mountinfo string
}

func (o Options) root() string {
	if o.Root == "" {
		return "tiee"
	}
	return o.Root
}

// None is the Manager of a host without usable cgroups: its cgroups hold
// nothing and every operation but Remove fails with ErrNotSupported.
type None struct{}

var (
	_ Manager = None{}
	_ Cgroup  = noneCgroup{}
)

// Kind implements Manager.
func (None) Kind() string { return KindNone }

// Create implements Manager.
func (None) Create(uint32, string) (Cgroup, error) { return noneCgroup{}, nil }

type noneCgroup struct{}

func (noneCgroup) Path() string                { return "" }
func (noneCgroup) AddPID(int) error            { return ErrNotSupported }
func (noneCgroup) SetMemoryLimit(uint64) error { return ErrNotSupported }
func (noneCgroup) PIDs() ([]int, error)        { return nil, ErrNotSupported }
func (noneCgroup) HasPID(int) (bool, error)    { return false, ErrNotSupported }
func (noneCgroup) Signal(syscall.Signal) error { return ErrNotSupported }
func (noneCgroup) Kill() error                 { return ErrNotSupported }
func (noneCgroup) Freeze() error               { return ErrNotSupported }
func (noneCgroup) Thaw() error                 { return ErrNotSupported }
func (noneCgroup) OOMKills() (uint64, error)   { return 0, ErrNotSupported }
func (noneCgroup) Remove() error               { return nil }
