package gpu

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeSysfs lays out a fake sys/devices/system/cpu: cpu c is thread t of
// core k on package p as given by where(c).
func writeSysfs(t *testing.T, n int, where func(c int) (pkg, core int), siblings func(c int) string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "sys", "devices", "system", "cpu")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "online"), []byte("0-"+strconv.Itoa(n-1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < n; c++ {
		td := filepath.Join(dir, "cpu"+strconv.Itoa(c), "topology")
		if err := os.MkdirAll(td, 0o755); err != nil {
			t.Fatal(err)
		}
		p, _ := where(c)
		os.WriteFile(filepath.Join(td, "physical_package_id"), []byte(strconv.Itoa(p)+"\n"), 0o644)
		os.WriteFile(filepath.Join(td, "core_cpus_list"), []byte(siblings(c)+"\n"), 0o644)
	}
	return root
}

func maskOf(cpus ...int) []uint {
	m := make([]uint, 4)
	for _, c := range cpus {
		m[c/64] |= 1 << uint(c%64)
	}
	return m
}

func rng(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

// TestReadCPUMap_Cores: machine CPUs to abstract cores as
// xcpuinfo_mac_to_abs numbers them, on a DGX H100 layout (2 sockets x 56
// cores x 2 threads, CPU c and c+112 siblings) and on a layout where
// sockets interleave CPU ids.
func TestReadCPUMap_Cores(t *testing.T) {
	dgx := writeSysfs(t, 224, func(c int) (int, int) { return (c % 112) / 56, c % 112 },
		func(c int) string { k := c % 112; return strconv.Itoa(k) + "," + strconv.Itoa(k+112) })
	// Even CPUs on package 0, odd on package 1, no SMT: socket 0's cores
	// are abstract 0-3, socket 1's 4-7.
	inter := writeSysfs(t, 8, func(c int) (int, int) { return c % 2, c / 2 },
		func(c int) string { return strconv.Itoa(c) })
	cases := []struct {
		name, root string
		mask       []uint
		want       string
	}{
		{"dgx socket 0 with threads", dgx, maskOf(append(rng(0, 55), rng(112, 167)...)...), "0-55"},
		{"dgx socket 1 with threads", dgx, maskOf(append(rng(56, 111), rng(168, 223)...)...), "56-111"},
		{"dgx one thread of cores 3 and 5", dgx, maskOf(115, 5), "3,5"},
		{"dgx runs of two", dgx, maskOf(0, 1, 3, 4, 5, 7), "0-1,3-5,7"},
		{"interleaved socket 1", inter, maskOf(1, 3, 5, 7), "4-7"},
		{"interleaved CPUs 0 and 1", inter, maskOf(0, 1), "0,4"},
		{"unknown CPUs dropped", inter, maskOf(2, 200), "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ReadCPUMap(c.root)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Cores(c.mask)
			if err != nil || got != c.want {
				t.Fatalf("Cores = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	m, _ := ReadCPUMap(inter)
	if _, err := m.Cores(maskOf(100)); err == nil {
		t.Fatal("an affinity with no known CPU must be an error (stock refuses an empty one)")
	}
}

func TestReadCPUMap_Missing(t *testing.T) {
	if _, err := ReadCPUMap(t.TempDir()); err == nil {
		t.Fatal("a root without sysfs must be an error")
	}
}
