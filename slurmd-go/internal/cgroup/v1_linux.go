package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// v1Controllers are the v1 controllers used, in order of preference for
// tracking: freezer (race-free kill), then memory, then pids.
var v1Controllers = []string{"freezer", "memory", "pids"}

// V1 is the cgroup v1 Manager over the freezer, memory and pids
// controllers that are mounted.
type V1 struct {
	mounts map[string]string // controller -> mount point, only those used
	track  string            // controller whose cgroup.procs is the truth
	root   string
}

var (
	_ Manager = (*V1)(nil)
	_ Cgroup  = (*v1Cgroup)(nil)
)

// NewV1 returns a v1 Manager; mounts maps controllers to mount points (see
// Mounts). At least one of freezer, memory and pids must be mounted.
func NewV1(mounts map[string]string, root string) (*V1, error) {
	m := &V1{mounts: map[string]string{}, root: filepath.Clean(root)}
	for _, c := range v1Controllers {
		if mnt, ok := mounts[c]; ok && exists(filepath.Join(mnt, "cgroup.procs")) {
			m.mounts[c] = mnt
			if m.track == "" {
				m.track = c
			}
		}
	}
	if m.track == "" {
		return nil, fmt.Errorf("%w: no v1 freezer, memory or pids controller mounted", ErrNotSupported)
	}
	return m, nil
}

// Kind implements Manager.
func (*V1) Kind() string { return KindV1 }

// Controllers lists the v1 controllers this Manager uses.
func (m *V1) Controllers() []string {
	var out []string
	for _, c := range v1Controllers {
		if _, ok := m.mounts[c]; ok {
			out = append(out, c)
		}
	}
	return out
}

// Create implements Manager.
func (m *V1) Create(job uint32, step string) (Cgroup, error) {
	c := &v1Cgroup{jobs: map[string]string{}, steps: map[string]string{}, track: m.track}
	for ctrl, mnt := range m.mounts {
		jobDir := filepath.Join(mnt, m.root, jobDirName(job))
		stepDir := filepath.Join(jobDir, stepDirName(step))
		if err := mkdirAll(mnt, stepDir, ctrl == "memory"); err != nil {
			return nil, err
		}
		c.jobs[ctrl], c.steps[ctrl] = jobDir, stepDir
	}
	return c, nil
}

// mkdirAll creates dir and its parents below mount; for the memory
// controller each new level gets memory.use_hierarchy=1 so a job limit
// covers its steps (kernels that dropped the knob always behave so).
func mkdirAll(mount, dir string, memory bool) error {
	rel, err := filepath.Rel(mount, dir)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	cur := mount
	for _, part := range splitPath(rel) {
		cur = filepath.Join(cur, part)
		err := os.Mkdir(cur, 0o755)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup: %w", err)
		}
		if err == nil && memory {
			_ = writeFile(cur, "memory.use_hierarchy", "1")
		}
	}
	return nil
}

func splitPath(rel string) []string {
	var parts []string
	for rel != "." && rel != "" && rel != "/" {
		dir, base := filepath.Split(rel)
		parts = append([]string{base}, parts...)
		rel = filepath.Clean(dir)
		if dir == "" {
			break
		}
	}
	return parts
}

type v1Cgroup struct {
	jobs  map[string]string // controller -> job_<id> dir
	steps map[string]string // controller -> step dir
	track string
}

func (c *v1Cgroup) Path() string { return c.steps[c.track] }

func (c *v1Cgroup) AddPID(pid int) error {
	var errs []error
	for _, d := range c.steps {
		errs = append(errs, writeFile(d, "cgroup.procs", strconv.Itoa(pid)))
	}
	return errors.Join(errs...)
}

func (c *v1Cgroup) SetMemoryLimit(bytes uint64) error {
	d, ok := c.jobs["memory"]
	if !ok {
		return fmt.Errorf("%w: no v1 memory controller", ErrNotSupported)
	}
	return writeFile(d, "memory.limit_in_bytes", strconv.FormatUint(bytes, 10))
}

func (c *v1Cgroup) PIDs() ([]int, error) { return readPIDs(c.Path(), true) }

func (c *v1Cgroup) HasPID(pid int) (bool, error) {
	pids, err := c.PIDs()
	return hasPID(pids, pid), err
}

func (c *v1Cgroup) Signal(sig syscall.Signal) error {
	pids, err := c.PIDs()
	if err != nil {
		return err
	}
	return signalPIDs(pids, sig)
}

func (c *v1Cgroup) Kill() error {
	if _, ok := c.steps["freezer"]; !ok {
		return c.Signal(syscall.SIGKILL)
	}
	if err := c.Freeze(); err != nil {
		_ = c.Signal(syscall.SIGKILL)
		return errors.Join(err, c.Thaw())
	}
	err := c.Signal(syscall.SIGKILL)
	return errors.Join(err, c.Thaw())
}

func (c *v1Cgroup) Freeze() error {
	d, ok := c.steps["freezer"]
	if !ok {
		return fmt.Errorf("%w: no v1 freezer controller", ErrNotSupported)
	}
	if err := writeFile(d, "freezer.state", "FROZEN"); err != nil {
		return err
	}
	return waitFor(FreezeTimeout, func() (bool, error) {
		s, err := readFile(d, "freezer.state")
		if s == "FREEZING" {
			// A task in an uninterruptible sleep holds the freeze; ask again.
			_ = writeFile(d, "freezer.state", "FROZEN")
		}
		return s == "FROZEN", err
	})
}

func (c *v1Cgroup) Thaw() error {
	d, ok := c.steps["freezer"]
	if !ok {
		return fmt.Errorf("%w: no v1 freezer controller", ErrNotSupported)
	}
	return writeFile(d, "freezer.state", "THAWED")
}

func (c *v1Cgroup) OOMKills() (uint64, error) {
	// v1 counts a kill in the victim's own memory cgroup only.
	j, ok := c.jobs["memory"]
	if !ok {
		return 0, ErrNotSupported
	}
	var total uint64
	for _, d := range []string{j, c.steps["memory"]} {
		v, found, err := keyValue(filepath.Join(d, "memory.oom_control"), "oom_kill")
		if err != nil {
			return 0, err
		}
		if !found {
			return 0, ErrNotSupported // kernels before 4.13
		}
		total += v
	}
	return total, nil
}

func (c *v1Cgroup) Remove() error {
	var errs []error
	for ctrl, d := range c.steps {
		errs = append(errs, rmdirRetry(d))
		rmdirIfEmpty(c.jobs[ctrl])
	}
	return errors.Join(errs...)
}
