package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// DevicesV1 confines devices with the cgroup v1 devices controller, in its
// own hierarchy: <mount>/<root>/job_<id>/step_<step>/task_<n>. A new v1
// cgroup inherits its parent's list, so a deny written at the job level
// holds for every step and task below it.
type DevicesV1 struct {
	mount string
	root  string
}

var (
	_ DeviceManager = (*DevicesV1)(nil)
	_ DeviceCgroup  = (*devicesV1Cgroup)(nil)
)

// NewDevicesV1 returns the v1 device manager for the devices controller
// mounted at mount, with job cgroups under mount/root.
func NewDevicesV1(mount, root string) (*DevicesV1, error) {
	if !exists(filepath.Join(mount, "devices.deny")) {
		return nil, fmt.Errorf("%w: %s is no v1 devices hierarchy", ErrNotSupported, mount)
	}
	return &DevicesV1{mount: mount, root: filepath.Clean(root)}, nil
}

// NewDevices probes the mounts (o.Mountinfo) for a device controller:
// the v1 devices hierarchy, else the cgroup2 mount (a device program).
func NewDevices(o Options) (DeviceManager, error) {
	h, err := Mounts(o.Mountinfo)
	if err != nil {
		return nil, err
	}
	if mnt, ok := h.V1["devices"]; ok {
		return NewDevicesV1(mnt, o.root())
	}
	if h.V2 != "" {
		return NewDevicesV2(h.V2, o.root())
	}
	return nil, fmt.Errorf("%w: no devices controller mounted", ErrNotSupported)
}

// Kind implements DeviceManager.
func (*DevicesV1) Kind() string { return KindV1 }

// Confine implements DeviceManager.
func (m *DevicesV1) Confine(job uint32, step string, jobRules, stepRules []DeviceRule) (DeviceCgroup, error) {
	jobDir := filepath.Join(m.mount, m.root, jobDirName(job))
	stepDir := filepath.Join(jobDir, stepDirName(step))
	if err := mkdirAll(m.mount, stepDir, false); err != nil {
		return nil, err
	}
	if err := writeDeviceRules(jobDir, jobRules); err != nil {
		return nil, err
	}
	if err := writeDeviceRules(stepDir, stepRules); err != nil {
		return nil, err
	}
	return &devicesV1Cgroup{job: jobDir, step: stepDir, stepRules: stepRules}, nil
}

// writeDeviceRules writes each rule to devices.allow or devices.deny, as
// task/cgroup does (an allow under an allowing parent changes nothing; the
// denies are what confine).
func writeDeviceRules(dir string, rules []DeviceRule) error {
	for _, r := range rules {
		file := "devices.deny"
		if r.Allow {
			file = "devices.allow"
		}
		if err := writeFile(dir, file, r.String()); err != nil {
			return err
		}
	}
	return nil
}

type devicesV1Cgroup struct {
	job, step string
	stepRules []DeviceRule
	mu        sync.Mutex
	tasks     []string // guarded by mu
}

// AddTask implements DeviceCgroup.
func (c *devicesV1Cgroup) AddTask(task int, pid int, rules []DeviceRule) error {
	if rules == nil {
		rules = c.stepRules
	}
	dir := filepath.Join(c.step, "task_"+strconv.Itoa(task))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	c.mu.Lock()
	c.tasks = append(c.tasks, dir)
	c.mu.Unlock()
	if err := writeDeviceRules(dir, rules); err != nil {
		return err
	}
	return writeFile(dir, "cgroup.procs", strconv.Itoa(pid))
}

// Remove implements DeviceCgroup.
func (c *devicesV1Cgroup) Remove() error {
	c.mu.Lock()
	tasks := c.tasks
	c.tasks = nil
	c.mu.Unlock()
	var errs []error
	for _, d := range tasks {
		if err := rmdirRetry(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := rmdirRetry(c.step); err != nil {
		errs = append(errs, err)
	}
	// The job level goes with its last step; another step's dir keeps it.
	rmdirIfEmpty(c.job)
	return errors.Join(errs...)
}
