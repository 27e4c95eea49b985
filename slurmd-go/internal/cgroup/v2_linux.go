package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// wantV2 are the controllers enabled down to job cgroups when available.
var wantV2 = []string{"memory", "pids"}

// V2 is the cgroup v2 Manager.
type V2 struct {
	mount string // the cgroup2 mount point
	root  string // relative directory under it
}

var (
	_ Manager = (*V2)(nil)
	_ Cgroup  = (*v2Cgroup)(nil)
)

// NewV2 returns a v2 Manager for the hierarchy mounted at mount, with job
// cgroups under mount/root.
func NewV2(mount, root string) (*V2, error) {
	if !exists(filepath.Join(mount, "cgroup.controllers")) {
		return nil, fmt.Errorf("cgroup: %s is not a cgroup2 mount", mount)
	}
	return &V2{mount: mount, root: filepath.Clean(root)}, nil
}

// Kind implements Manager.
func (*V2) Kind() string { return KindV2 }

// Create implements Manager. Every level from the mount point down to
// job_<id> gets the memory and pids controllers enabled for its children
// where offered (best effort: a level that holds processes cannot).
func (m *V2) Create(job uint32, step string) (Cgroup, error) {
	jobDir := filepath.Join(m.mount, m.root, jobDirName(job))
	rel, _ := filepath.Rel(m.mount, jobDir)
	dir := m.mount
	enableV2(dir)
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		enableV2(dir)
	}
	stepDir := filepath.Join(jobDir, stepDirName(step))
	if err := os.Mkdir(stepDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return &v2Cgroup{job: jobDir, dir: stepDir}, nil
}

func enableV2(dir string) {
	avail, err := readFile(dir, "cgroup.controllers")
	if err != nil {
		return
	}
	on, _ := readFile(dir, "cgroup.subtree_control")
	var add []string
	for _, c := range wantV2 {
		if hasWord(avail, c) && !hasWord(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		_ = writeFile(dir, "cgroup.subtree_control", strings.Join(add, " "))
	}
}

func hasWord(list, w string) bool {
	for _, f := range strings.Fields(list) {
		if f == w {
			return true
		}
	}
	return false
}

type v2Cgroup struct {
	job string // job_<id> directory
	dir string // step_<step> directory
}

func (c *v2Cgroup) Path() string { return c.dir }

func (c *v2Cgroup) AddPID(pid int) error {
	return writeFile(c.dir, "cgroup.procs", strconv.Itoa(pid))
}

func (c *v2Cgroup) SetMemoryLimit(bytes uint64) error {
	if !exists(filepath.Join(c.job, "memory.max")) {
		return fmt.Errorf("%w: no memory controller in %s", ErrNotSupported, c.job)
	}
	return writeFile(c.job, "memory.max", strconv.FormatUint(bytes, 10))
}

func (c *v2Cgroup) PIDs() ([]int, error) { return readPIDs(c.dir, true) }

func (c *v2Cgroup) HasPID(pid int) (bool, error) {
	pids, err := c.PIDs()
	return hasPID(pids, pid), err
}

func (c *v2Cgroup) Signal(sig syscall.Signal) error {
	pids, err := c.PIDs()
	if err != nil {
		return err
	}
	return signalPIDs(pids, sig)
}

func (c *v2Cgroup) Kill() error {
	if exists(filepath.Join(c.dir, "cgroup.kill")) {
		return writeFile(c.dir, "cgroup.kill", "1")
	}
	// Kernels before 5.14: freeze so nothing forks, kill, thaw.
	if err := c.Freeze(); err != nil {
		_ = c.Signal(syscall.SIGKILL)
		return err
	}
	err := c.Signal(syscall.SIGKILL)
	return errors.Join(err, c.Thaw())
}

func (c *v2Cgroup) Freeze() error {
	if err := writeFile(c.dir, "cgroup.freeze", "1"); err != nil {
		return err
	}
	return waitFor(FreezeTimeout, func() (bool, error) {
		v, ok, err := keyValue(filepath.Join(c.dir, "cgroup.events"), "frozen")
		return ok && v == 1, err
	})
}

func (c *v2Cgroup) Thaw() error { return writeFile(c.dir, "cgroup.freeze", "0") }

func (c *v2Cgroup) OOMKills() (uint64, error) {
	p := filepath.Join(c.job, "memory.events")
	if !exists(p) {
		return 0, ErrNotSupported
	}
	v, _, err := keyValue(p, "oom_kill")
	return v, err
}

func (c *v2Cgroup) Remove() error {
	// Sub-cgroups a root job made, deepest first.
	var dirs []string
	_ = filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != c.dir {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = rmdirRetry(dirs[i])
	}
	if err := rmdirRetry(c.dir); err != nil {
		return err
	}
	rmdirIfEmpty(c.job)
	return nil
}
