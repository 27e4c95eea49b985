package gpu

import (
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/hostinfo"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// CPUMap turns machine CPU ids (the kernel's, as NVML's CPU affinity uses)
// into Slurm's abstract core ids, as slurmd's xcpuinfo_mac_to_abs does:
// cores are numbered socket by socket in hwloc's logical order (sockets and
// cores ordered by their lowest CPU), and a core is in the result when any
// of its CPUs is.
type CPUMap struct {
	coreOf  map[int]int // machine CPU id -> abstract core id
	cores   int
	sockets [][]int // machine CPUs of each socket, in Slurm's socket order
}

// ReadCPUMap reads root/sys/devices/system/cpu ("" or "/" for the host).
func ReadCPUMap(root string) (*CPUMap, error) {
	if root == "" {
		root = "/"
	}
	dir := filepath.Join(root, "sys", "devices", "system", "cpu")
	cpus, err := hostinfo.OnlineCPUs(dir)
	if err != nil {
		return nil, err
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("gpu: no online CPU under %s", dir)
	}
	type core struct {
		pkg   string
		first int
		cpus  []int
	}
	pkgFirst := map[string]int{}
	cores := map[string]*core{}
	for _, c := range cpus {
		td := filepath.Join(dir, "cpu"+strconv.Itoa(c), "topology")
		pkg, ok := readTrim(td, "physical_package_id")
		if !ok || pkg == "-1" {
			pkg, ok = readTrim(td, "package_cpus_list", "core_siblings_list")
		}
		if !ok {
			pkg = "0"
		}
		sib, ok := readTrim(td, "core_cpus_list", "thread_siblings_list")
		if !ok {
			sib = "cpu" + strconv.Itoa(c) // no sibling information: one CPU per core
		}
		key := pkg + "|" + sib
		k := cores[key]
		if k == nil {
			k = &core{pkg: pkg, first: c}
			cores[key] = k
		}
		k.cpus = append(k.cpus, c)
		if f, seen := pkgFirst[pkg]; !seen || c < f {
			pkgFirst[pkg] = c
		}
	}
	list := make([]*core, 0, len(cores))
	for _, k := range cores {
		list = append(list, k)
	}
	sort.Slice(list, func(i, j int) bool {
		pi, pj := pkgFirst[list[i].pkg], pkgFirst[list[j].pkg]
		if pi != pj {
			return pi < pj
		}
		return list[i].first < list[j].first
	})
	m := &CPUMap{coreOf: map[int]int{}, cores: len(list)}
	last := ""
	for i, k := range list {
		if i == 0 || k.pkg != last {
			m.sockets = append(m.sockets, nil)
			last = k.pkg
		}
		for _, c := range k.cpus {
			m.coreOf[c] = i
		}
		m.sockets[len(m.sockets)-1] = append(m.sockets[len(m.sockets)-1], k.cpus...)
	}
	for _, cs := range m.sockets {
		sort.Ints(cs)
	}
	return m, nil
}

// Sockets returns the machine CPUs of each socket, sockets in Slurm's
// order (nil for a map built by NewCPUMap).
func (m *CPUMap) Sockets() [][]int { return m.sockets }

// NewCPUMap builds a map from explicit cores: cores[i] lists the machine
// CPUs of abstract core i (tests, and the mock's synthetic host).
func NewCPUMap(cores [][]int) *CPUMap {
	m := &CPUMap{coreOf: map[int]int{}, cores: len(cores)}
	for i, cs := range cores {
		for _, c := range cs {
			m.coreOf[c] = i
		}
	}
	return m
}

// CPUs returns the number of machine CPUs the map knows.
func (m *CPUMap) CPUs() int { return len(m.coreOf) }

// MaxCPU returns the highest machine CPU id, -1 if none.
func (m *CPUMap) MaxCPU() int {
	hi := -1
	for c := range m.coreOf {
		hi = max(hi, c)
	}
	return hi
}

// Cores converts an NVML CPU affinity mask (64 CPUs per word, CPU 0 in
// bit 0 of word 0) into abstract core ids in Slurm's bit_fmt form
// ("0-55", "56-111", "0,2,4-7"). CPUs the map does not know (offline, or
// E-cores slurmd leaves out) are dropped. An empty mask yields an error,
// as stock refuses it.
func (m *CPUMap) Cores(mask []uint) (string, error) {
	set := make([]bool, m.cores)
	any := false
	for w, word := range mask {
		for b := 0; b < 64; b++ {
			if word&(1<<uint(b)) == 0 {
				continue
			}
			if k, ok := m.coreOf[w*64+b]; ok {
				set[k] = true
				any = true
			}
		}
	}
	if !any {
		return "", fmt.Errorf("gpu: empty CPU affinity (mask %v)", mask)
	}
	return bitFmt(set), nil
}

// bitFmt prints set bits as Slurm's bit_fmt does: runs of two or more as
// "a-b", single bits alone, comma separated.
func bitFmt(set []bool) string {
	var b strings.Builder
	for i := 0; i < len(set); i++ {
		if !set[i] {
			continue
		}
		j := i
		for j+1 < len(set) && set[j+1] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", i, j)
		} else {
			fmt.Fprintf(&b, "%d", i)
		}
		i = j
	}
	return b.String()
}

func readTrim(dir string, names ...string) (string, bool) {
	for _, n := range names {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			return strings.TrimSpace(string(b)), true
		}
	}
	return "", false
}
