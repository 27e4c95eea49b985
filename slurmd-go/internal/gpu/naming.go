package gpu

import (
	"fmt"
	"math"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Naming rules of Slurm's gpu/nvml plugin (src/plugins/gpu/nvml/gpu_nvml.c),
// which differ between the releases a node can talk to.

// typeName is gpu_common_underscorify_tolower: lower case, spaces to '_'.
func typeName(nvmlName string) string {
	return strings.ReplaceAll(strings.ToLower(nvmlName), " ", "_")
}

// migBase is the GPU's type cut at its first '-' (the part a MIG profile
// name is appended to): "nvidia_a100-sxm4-40gb" -> "nvidia_a100".
func migBase(gpuType string) string {
	base, _, _ := strings.Cut(gpuType, "-")
	return base
}

// migAttrs are the nvmlDeviceAttributes_t fields a MIG profile name uses.
type migAttrs struct {
	GISlices, CISlices uint32
	MemoryMB           uint64
}

// migProfile returns the "_<...>" suffix of a MIG instance's type.
//
//   - 22.05: "_<gi slices>g.<round(MB/1024)>gb" from the attributes;
//   - 24.11 and later: the part of the MIG device's underscored name from
//     "mig_" on without "mig" ("..._mig_1g.10gb" -> "_1g.10gb"); when the
//     name has none, "_[<ci slices>c.]<gi slices>g.<ceil(MB/1024)>gb".
func migProfile(release uint16, migName string, attrs func() (migAttrs, error)) (string, error) {
	if release >= release2411 {
		if n := typeName(migName); n != "" {
			if i := strings.Index(n, "mig_"); i >= 0 {
				return n[i+3:], nil
			}
		}
	}
	a, err := attrs()
	if err != nil {
		return "", err
	}
	if release < release2411 {
		return fmt.Sprintf("_%dg.%dgb", a.GISlices, uint64(math.Round(float64(a.MemoryMB)/1024))), nil
	}
	s := "_"
	if a.CISlices != a.GISlices {
		s += fmt.Sprintf("%dc.", a.CISlices)
	}
	return s + fmt.Sprintf("%dg.%dgb", a.GISlices, (a.MemoryMB+1023)/1024), nil
}

// migUniqueID: drivers from 470.42.01 on give each MIG device its own
// "MIG-<uuid>" UUID, which stock uses; older ones get
// "MIG-<gpu uuid>/<gi>/<ci>".
func migUniqueID(driver, migUUID, gpuUUID string, gi, ci int) string {
	if driverAtLeast(driver, 470, 42, 1) {
		return migUUID
	}
	return fmt.Sprintf("MIG-%s/%d/%d", gpuUUID, gi, ci)
}

// driverAtLeast compares "major.minor.rev" as stock's sscanf("%d.%d.%d")
// (missing parts are 0).
func driverAtLeast(v string, major, minor, rev int) bool {
	var p [3]int
	for i, s := range strings.SplitN(v, ".", 3) {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		p[i] = n
	}
	switch {
	case p[0] != major:
		return p[0] > major
	case p[1] != minor:
		return p[1] > minor
	}
	return p[2] >= rev
}

// emptyLinks is gres_links_create_empty: -1 at index i of n, 0 elsewhere
// (22.05's Links of a MIG instance).
func emptyLinks(i, n int) string {
	links := make([]int, n)
	links[i] = -1
	return joinInts(links)
}

func joinInts(v []int) string {
	var b strings.Builder
	for i, n := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", n)
	}
	return b.String()
}

// Releases whose naming differs.
const (
	release2411 = slurmproto.Version2411
	release2605 = slurmproto.Version2605
)
