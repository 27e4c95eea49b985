package hostinfo

import (
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

func TestReadTopology(t *testing.T) {
	for _, tc := range []struct {
		name      string
		root      string
		want      Topology
		wantWarns int
	}{
		{"2 sockets x 4 cores x 2 threads", "testdata/2s4c2t",
			Topology{CPUs: 16, Boards: 1, Sockets: 2, CoresPerSocket: 4, ThreadsPerCore: 2}, 0},
		// hwloc counts online PUs only; 15/8 truncates like the C code.
		{"one CPU offline", "testdata/2s4c2t-cpu15-offline",
			Topology{CPUs: 15, Boards: 1, Sockets: 2, CoresPerSocket: 4, ThreadsPerCore: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadTopology(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Warnings) != tc.wantWarns {
				t.Errorf("warnings = %q", got.Warnings)
			}
			got.Warnings = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := ReadTopology(t.TempDir()); err == nil {
		t.Error("ReadTopology of an empty root succeeded")
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, true},
		{"", nil, true},
		{"3-1", nil, false},
		{"x", nil, false},
	} {
		got, err := parseCPUList(tc.in)
		if (err == nil) != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestProbeRoot_FrozenTopology(t *testing.T) {
	info, err := ProbeRoot("testdata/2s4c2t", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if info.CPUs != 16 || info.Sockets != 2 || info.SocketsPerBoard() != 2 || info.CoresPerSocket != 4 || info.ThreadsPerCore != 2 {
		t.Errorf("topology = %+v", info)
	}
	if info.RealMemory == 0 || info.UpTime == 0 || info.Arch == "" || info.Hostname == "" || strings.Count(info.OS, " ") < 2 {
		t.Errorf("kernel values = %+v", info)
	}
}

func TestProbe_MissingTmpFS(t *testing.T) {
	info, err := Probe("/nonexistent/tiee-tmpfs")
	if err != nil || info.TmpDisk != 0 || len(info.Warnings) != 0 {
		t.Errorf("Probe = %+v, %v; want TmpDisk 0 and no warning (as Slurm)", info, err)
	}
}

func TestProbe_EnvOverrides(t *testing.T) {
	t.Setenv("SLURM_ARCH", "myarch")
	t.Setenv("SLURM_OS", "myos")
	info, err := Probe("")
	if err != nil || info.Arch != "myarch" || info.OS != "myos" {
		t.Errorf("Probe = %+v, %v", info, err)
	}
}

var slurmdC = regexp.MustCompile(`NodeName=(\S+) CPUs=(\d+) Boards=(\d+) SocketsPerBoard=(\d+) CoresPerSocket=(\d+) ThreadsPerCore=(\d+) RealMemory=(\d+)\s+UpTime=(\d+)-(\d+):(\d+):(\d+)`)

// TestProbe_MatchesSlurmdC compares Probe on this machine with what the real
// slurmd 22.05 prints for `slurmd -C`.
func TestProbe_MatchesSlurmdC(t *testing.T) {
	bin, err := exec.LookPath("slurmd")
	if err != nil {
		bin = "/usr/sbin/slurmd"
	}
	out, err := exec.Command(bin, "-C").Output()
	if err != nil {
		t.Fatalf("slurmd -C (Debian slurmd 22.05) is required by this test: %v", err)
	}
	info, err := Probe("")
	if err != nil {
		t.Fatal(err)
	}
	m := slurmdC.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("cannot parse slurmd -C output %q", out)
	}
	n := func(i int) uint64 { v, _ := strconv.ParseUint(m[i], 10, 64); return v }
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"CPUs", uint64(info.CPUs), n(2)},
		{"Boards", uint64(info.Boards), n(3)},
		{"SocketsPerBoard", uint64(info.SocketsPerBoard()), n(4)},
		{"CoresPerSocket", uint64(info.CoresPerSocket), n(5)},
		{"ThreadsPerCore", uint64(info.ThreadsPerCore), n(6)},
		{"RealMemory", info.RealMemory, n(7)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, slurmd -C says %d", c.name, c.got, c.want)
		}
	}
	if info.Hostname != m[1] {
		t.Errorf("Hostname = %q, slurmd -C says %q", info.Hostname, m[1])
	}
	up := n(8)*86400 + n(9)*3600 + n(10)*60 + n(11)
	if d := int64(info.UpTime) - int64(up); d < 0 || d > 5 {
		t.Errorf("UpTime = %d, slurmd -C says %d", info.UpTime, up)
	}
}

func TestRealMemory(t *testing.T) {
	for _, tc := range []struct {
		pages, pageSize, want uint64
	}{
		{6170905, 4096, 24105}, // 24683620 kB host
		{262144, 4096, 1024},
		// (float)16777471 is 16777472: the C code reports one MiB more than
		// exact arithmetic would.
		{16777471, 4096, 65537},
		{1 << 20, 65536, 65536},
	} {
		if got := realMemory(tc.pages, tc.pageSize); got != tc.want {
			t.Errorf("realMemory(%d, %d) = %d, want %d", tc.pages, tc.pageSize, got, tc.want)
		}
	}
}

func TestCPULoad(t *testing.T) {
	for _, tc := range []struct {
		load uint64
		want uint32
	}{
		{0, 0}, {65536, 100}, {98304, 150}, {65536 / 3, 33}, {65536 * 64, 6400},
	} {
		if got := cpuLoad(tc.load); got != tc.want {
			t.Errorf("cpuLoad(%d) = %d, want %d", tc.load, got, tc.want)
		}
	}
}

func node(cpus, boards, sockets, cores, threads uint16) *slurmconf.Node {
	return &slurmconf.Node{Name: "n1", CPUs: cpus, Boards: boards, Sockets: sockets, CoresPerSocket: cores, ThreadsPerCore: threads}
}

func topo(i Info) [5]uint16 {
	return [5]uint16{i.CPUs, i.Boards, i.Sockets, i.CoresPerSocket, i.ThreadsPerCore}
}

func TestReported(t *testing.T) {
	hw := Info{CPUs: 16, Boards: 1, Sockets: 2, CoresPerSocket: 4, ThreadsPerCore: 2, RealMemory: 1000, UpTime: 77}
	for _, tc := range []struct {
		name      string
		conf      *slurmconf.Node
		overrides bool
		want      [5]uint16
	}{
		{"config equal to hardware", node(16, 1, 2, 4, 2), false, [5]uint16{16, 1, 2, 4, 2}},
		{"config smaller: config wins", node(4, 1, 1, 4, 1), false, [5]uint16{4, 1, 1, 4, 1}},
		{"config larger: hardware wins", node(32, 1, 2, 8, 2), false, [5]uint16{16, 1, 2, 4, 2}},
		{"config larger with config_overrides", node(32, 1, 2, 8, 2), true, [5]uint16{32, 1, 2, 8, 2}},
		{"same CPUs, other split: config wins", node(16, 1, 4, 2, 2), false, [5]uint16{16, 1, 4, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Reported(hw, tc.conf, tc.overrides)
			if topo(got) != tc.want {
				t.Errorf("Reported = %v, want %v", topo(got), tc.want)
			}
			if got.RealMemory != hw.RealMemory || got.UpTime != hw.UpTime {
				t.Errorf("measured fields changed: %+v", got)
			}
		})
	}
}

func TestReportedFor(t *testing.T) {
	// A KNL-like node rebooted into another NUMA mode: 4x8 became 2x16.
	hw := Info{CPUs: 64, Boards: 1, Sockets: 4, CoresPerSocket: 8, ThreadsPerCore: 2}
	conf := node(64, 1, 2, 16, 2)
	for _, tc := range []struct {
		name string
		cfg  slurmconf.Config
		want [5]uint16
	}{
		{"linear: config", slurmconf.Config{SelectType: "select/linear"}, [5]uint16{64, 1, 2, 16, 2}},
		{"cons_tres: hardware split", slurmconf.Config{SelectType: "select/cons_tres"}, [5]uint16{64, 1, 4, 8, 2}},
		{"gang: hardware split", slurmconf.Config{SelectType: "select/linear", PreemptMode: "SUSPEND,GANG"}, [5]uint16{64, 1, 4, 8, 2}},
		{"overrides: config", slurmconf.Config{SelectType: "select/cons_tres", ConfigOverrides: true}, [5]uint16{64, 1, 2, 16, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := topo(ReportedFor(hw, conf, &tc.cfg)); got != tc.want {
				t.Errorf("ReportedFor = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProbeLoad_AgreesWithProbe(t *testing.T) {
	full, err := Probe("")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ProbeLoad()
	if err != nil {
		t.Fatal(err)
	}
	if d := int64(l.UpTime) - int64(full.UpTime); d < 0 || d > 2 {
		t.Fatalf("uptime %d vs %d", l.UpTime, full.UpTime)
	}
	if l.FreeMem == 0 || l.FreeMem > full.RealMemory+1 {
		t.Fatalf("free memory %d MiB of %d", l.FreeMem, full.RealMemory)
	}
}
