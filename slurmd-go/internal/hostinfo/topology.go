package hostinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Topology is the CPU layout as slurmd derives it from hwloc.
type Topology struct {
	CPUs           uint16 // online logical CPUs
	Boards         uint16
	Sockets        uint16
	CoresPerSocket uint16
	ThreadsPerCore uint16
	Warnings       []string
}

// ReadTopology reads root/sys/devices/system/cpu.
func ReadTopology(root string) (Topology, error) {
	dir := filepath.Join(root, "sys", "devices", "system", "cpu")
	cpus, err := OnlineCPUs(dir)
	if err != nil {
		return Topology{}, err
	}
	if len(cpus) == 0 {
		return Topology{}, fmt.Errorf("%w: no online CPU under %s", ErrProbe, dir)
	}
	t := Topology{Boards: 1}
	packages := map[string]bool{}
	cores := map[string]bool{}
	missing := 0
	for _, c := range cpus {
		td := filepath.Join(dir, "cpu"+strconv.Itoa(c), "topology")
		pkg, ok := firstFile(td, "physical_package_id", "package_cpus_list", "core_siblings_list")
		if !ok || pkg == "-1" {
			// No usable package id: group by the package's CPU list.
			pkg, ok = firstFile(td, "package_cpus_list", "core_siblings_list")
		}
		// hwloc groups PUs into cores by their sibling masks, which stay
		// unique even where core_id repeats across dies.
		core, ok2 := firstFile(td, "core_cpus_list", "thread_siblings_list")
		if !ok2 {
			if id, ok3 := firstFile(td, "core_id"); ok3 {
				core, ok2 = pkg+"/"+id, true
			}
		}
		if !ok || !ok2 {
			missing++
			continue
		}
		packages[pkg] = true
		cores[pkg+"|"+core] = true
	}
	n := len(cpus)
	if n > 0xffff {
		return Topology{}, fmt.Errorf("%w: %d CPUs do not fit Slurm's 16-bit count", ErrProbe, n)
	}
	t.CPUs = uint16(n)
	nsock, ncore := len(packages), len(cores)
	if missing > 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("no topology for %d of %d CPUs under %s", missing, n, dir))
	}
	// hwloc's fall-backs as applied by xcpuinfo_hwloc_topo_get.
	if nsock == 0 {
		nsock = 1
	}
	if ncore == 0 {
		ncore = 1
	}
	if n%ncore != 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("Thread count (%d) not multiple of core count (%d)", n, ncore))
	}
	if ncore%nsock != 0 {
		t.Warnings = append(t.Warnings, fmt.Sprintf("Core count (%d) not multiple of socket count (%d)", ncore, nsock))
	}
	t.Sockets = uint16(nsock)
	t.ThreadsPerCore = uint16(n / ncore)
	t.CoresPerSocket = uint16(ncore / nsock)
	return t, nil
}

// OnlineCPUs lists online CPUs from dir/online, or every cpuN directory
// when that file is missing.
func OnlineCPUs(dir string) ([]int, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "online")); err == nil {
		return parseCPUList(strings.TrimSpace(string(b)))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProbe, err)
	}
	var cpus []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "cpu")); err == nil && strings.HasPrefix(e.Name(), "cpu") {
			cpus = append(cpus, n)
		}
	}
	sort.Ints(cpus)
	return cpus, nil
}

// parseCPUList parses the kernel's list format "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("%w: bad CPU list %q", ErrProbe, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("%w: bad CPU list %q", ErrProbe, s)
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// firstFile returns the trimmed content of the first readable file.
func firstFile(dir string, names ...string) (string, bool) {
	for _, n := range names {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			return strings.TrimSpace(string(b)), true
		}
	}
	return "", false
}
