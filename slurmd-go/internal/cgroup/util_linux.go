package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Named timeouts.
const (
	// FreezeTimeout bounds waiting for a freeze to take effect.
	FreezeTimeout = 2 * time.Second
	// RemoveTimeout bounds retrying rmdir while the last processes of a
	// killed cgroup are still being torn down.
	RemoveTimeout = 2 * time.Second
	pollInterval  = 10 * time.Millisecond
)

func stepDirName(step string) string { return "step_" + step }
func jobDirName(job uint32) string   { return "job_" + strconv.FormatUint(uint64(job), 10) }

func writeFile(dir, name, val string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(val); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", val, f.Name(), err)
	}
	return nil
}

func readFile(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readPIDs reads cgroup.procs of dir and, if recursive, of every cgroup
// below it.
func readPIDs(dir string, recursive bool) ([]int, error) {
	var pids []int
	read := func(d string) error {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, l := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(l); err == nil {
				pids = append(pids, p)
			}
		}
		return nil
	}
	if !recursive {
		if err := read(dir); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		return pids, nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // a sub-cgroup removed while walking
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if err := read(p); err != nil && !(p != dir && errors.Is(err, fs.ErrNotExist)) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return pids, nil
}

func signalPIDs(pids []int, sig syscall.Signal) error {
	self := os.Getpid()
	var first error
	for _, p := range pids {
		if p <= 0 || p == self {
			continue
		}
		if err := syscall.Kill(p, sig); err != nil && err != syscall.ESRCH && first == nil {
			first = fmt.Errorf("cgroup: kill %d: %w", p, err)
		}
	}
	return first
}

func hasPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// rmdirRetry removes dir, retrying EBUSY for RemoveTimeout. A missing dir
// is fine.
func rmdirRetry(dir string) error {
	deadline := time.Now().Add(RemoveTimeout)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || err == syscall.ENOENT {
			return nil
		}
		if err != syscall.EBUSY || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: rmdir %s: %w", dir, err)
		}
		time.Sleep(pollInterval)
	}
}

// rmdirIfEmpty removes a parent (job) cgroup unless other children or
// processes keep it.
func rmdirIfEmpty(dir string) {
	_ = syscall.Rmdir(dir)
}

// keyValue returns the value of key in a flat-keyed file ("key value" lines).
func keyValue(path, key string) (uint64, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			v, err := strconv.ParseUint(f[1], 10, 64)
			return v, err == nil, err
		}
	}
	return 0, false, nil
}

func waitFor(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: timed out after %s", timeout)
		}
		time.Sleep(pollInterval)
	}
}
