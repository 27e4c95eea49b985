package proc

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Descriptor hygiene. Go's os/exec passes a child fds 0-2 and ExtraFiles,
// but also every descriptor of the parent that lacks close-on-exec: one a
// process inherited from whoever started it, or one made by a raw syscall.
// Stock Slurm closes them (slurmd closeall(3) at start, run_command's
// closeall(3) in the child), so a job never holds a descriptor that leads
// back to a root-owned process.

// CloseInherited closes every descriptor from `from` up that is not
// close-on-exec. Everything the Go runtime and standard library open is
// close-on-exec, so at a process's start these are exactly the descriptors
// it inherited: slurmd's closeall(3) without closing the runtime's own.
func CloseInherited(from int) error {
	fds, err := openFDs()
	if err != nil {
		return err
	}
	for _, fd := range fds {
		if fd < from {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile, or ours
		}
		_ = unix.Close(fd)
	}
	return nil
}

// CloseOnExecFrom marks every descriptor from `from` up close-on-exec, so
// that nothing this process execs (or starts with os/exec) gets more than
// what it is handed explicitly. The process itself keeps using them.
func CloseOnExecFrom(from int) error {
	err := unix.CloseRange(uint(from), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: one fcntl per descriptor.
	fds, lerr := openFDs()
	if lerr != nil {
		return fmt.Errorf("proc: close_range: %w; %w", err, lerr)
	}
	for _, fd := range fds {
		if fd >= from {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// openFDs lists this process's descriptors (without the one reading the
// directory, which is closed by then).
func openFDs() ([]int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("proc: list descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	self := int(d.Fd())
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("proc: list descriptors: %w", err)
	}
	var fds []int
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err == nil && fd != self {
			fds = append(fds, fd)
		}
	}
	return fds, nil
}
