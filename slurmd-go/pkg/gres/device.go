package gres

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"golang.org/x/sys/unix"
)

// DevType is the kind of a device file, as the device cgroup needs it.
type DevType int

const (
	DevChar  DevType = iota + 1 // 'c'
	DevBlock                    // 'b'
)

func (t DevType) String() string {
	if t == DevBlock {
		return "b"
	}
	return "c"
}

// Device is one device file of a GRES, in the order stock slurmd numbers
// them (common_node_config_load): Index is the bit of the GRES bitmap in a
// job credential, DevNum the number at the end of the path (nvidia3 → 3)
// that CUDA_VISIBLE_DEVICES and friends use.
type Device struct {
	Index    int    // position among this GRES name's devices: the credential bit
	DevNum   int    // trailing digits of Path; devices without get numbers after the largest
	Path     string // "/dev/nvidia0"
	Type     string // the record's Type ("" when untyped)
	UniqueID string // the record's UniqueId (MIG), "" when none
	Dev      DevType
	Major    uint32
	Minor    uint32
}

// ErrNotDevice is wrapped by Devices' errors for a File= entry that is no
// character or block device.
var ErrNotDevice = errors.New("not a valid character or block device")

// StatFunc reports the device numbers of path; StatDevice is the real one.
type StatFunc func(path string) (DevType, uint32, uint32, error)

// StatDevice stats path as stock's _set_gres_device_desc does (stat(2),
// following links).
func StatDevice(path string) (DevType, uint32, uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, 0, fmt.Errorf("gres: stat(%s): %w", path, &os.PathError{Op: "stat", Path: path, Err: err})
	}
	var t DevType
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		t = DevChar
	case unix.S_IFBLK:
		t = DevBlock
	default:
		return 0, 0, 0, fmt.Errorf("gres: %s: %w", path, ErrNotDevice)
	}
	return t, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), nil
}

// ExpandFiles expands a File= expression ("/dev/nvidia[0-3]") into paths in
// order, with the hostlist syntax stock uses for it (hostlist_create).
func ExpandFiles(expr string) ([]string, error) {
	paths, err := hostlist.Expand(expr)
	if err != nil {
		return nil, fmt.Errorf("gres: File=%s: %w", expr, err)
	}
	return paths, nil
}

// Devices lists the device files of the records named name (case-sensitive,
// as stock compares), in record order then File order, numbered as stock's
// common_node_config_load numbers them. A MultipleFiles record
// (Flags.Multiple) gives one index to all its files. stat is StatDevice
// unless a test passes its own. A file that cannot be statted or is no
// device is left out, without an index, and named in the error, as stock
// logs it and goes on.
func Devices(recs []Record, name string, stat StatFunc) ([]Device, error) {
	if stat == nil {
		stat = StatDevice
	}
	var devs []Device
	var errs []error
	index, maxNum := 0, -1
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Name != name || r.File == "" {
			continue
		}
		paths, err := ExpandFiles(r.File)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range paths {
			t, maj, min, err := stat(p)
			if err != nil {
				// Stock leaves the file out and gives its index to the next.
				errs = append(errs, err)
				continue
			}
			d := Device{Index: index, DevNum: trailingNumber(p), Path: p, Type: r.Type,
				UniqueID: r.UniqueID, Dev: t, Major: maj, Minor: min}
			if d.DevNum > maxNum {
				maxNum = d.DevNum
			}
			devs = append(devs, d)
			if r.Flags.Multiple {
				continue
			}
			if seen[p] {
				errs = append(errs, fmt.Errorf("gres: %s duplicate device file name (%s)", name, p))
			}
			seen[p] = true
			index++
		}
		if r.Flags.Multiple {
			index++
		}
	}
	for i := range devs {
		if devs[i].DevNum == -1 {
			maxNum++
			devs[i].DevNum = maxNum
		}
	}
	return devs, errors.Join(errs...)
}

// trailingNumber is the decimal number that ends path, -1 when none.
func trailingNumber(path string) int {
	i := len(path)
	for i > 0 && path[i-1] >= '0' && path[i-1] <= '9' {
		i--
	}
	if i == len(path) {
		return -1
	}
	n, err := strconv.Atoi(path[i:])
	if err != nil {
		return -1
	}
	return n
}
