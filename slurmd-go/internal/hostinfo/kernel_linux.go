//go:build linux

package hostinfo

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// probeKernel fills the values get_mach_stat.c takes from sysconf, sysinfo,
// statvfs and uname.
func probeKernel(info *Info, tmpFS string) error {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return fmt.Errorf("%w: sysinfo: %w", ErrProbe, err)
	}
	pageSize := uint64(unix.Getpagesize())
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	// glibc's _SC_PHYS_PAGES is totalram*mem_unit/pagesize.
	pages := uint64(si.Totalram) * unit / pageSize
	info.RealMemory = realMemory(pages, pageSize)
	info.FreeMem = uint64(si.Freeram) * unit / mib
	info.UpTime = uint32(si.Uptime)
	info.CPULoad = cpuLoad(uint64(si.Loads[1]))

	if tmpFS == "" {
		tmpFS = "/tmp"
	}
	var st unix.Statfs_t
	switch err := unix.Statfs(tmpFS, &st); {
	case err == nil:
		frsize := uint64(st.Frsize)
		if frsize == 0 {
			frsize = uint64(st.Bsize)
		}
		info.TmpDisk = uint32(st.Blocks * frsize / mib)
	case errors.Is(err, unix.ENOENT):
		// Slurm reports 0 silently for a missing TmpFS.
	default:
		info.Warnings = append(info.Warnings, fmt.Sprintf("statvfs %s: %v", tmpFS, err))
	}

	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("%w: uname: %w", ErrProbe, err)
	}
	info.Arch = unix.ByteSliceToString(u.Machine[:])
	info.OS = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
	return nil
}

// ProbeLoad reads only what changes between pings (load, free memory,
// uptime): one sysinfo call, no sysfs walk.
func ProbeLoad() (Load, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return Load{}, fmt.Errorf("%w: sysinfo: %w", ErrProbe, err)
	}
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	return Load{CPULoad: cpuLoad(uint64(si.Loads[1])), FreeMem: uint64(si.Freeram) * unit / mib, UpTime: uint32(si.Uptime)}, nil
}
