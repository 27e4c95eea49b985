package stepd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func TestStderrLevel(t *testing.T) {
	const slurmUser = 64030
	cases := []struct {
		name    string
		version uint16
		debug   int
		uid     uint32
		want    int
		refused bool
	}{
		{"22.05 none", slurmproto.Version2205, 0, 1001, logError, false},
		{"22.05 adds to error", slurmproto.Version2205, 2, 1001, logVerbose, false},
		{"22.05 caps at debug3", slurmproto.Version2205, 9, 1001, logDebug3, false},
		{"24.11 absolute for root", slurmproto.Version2411, logDebug, 0, logDebug, false},
		{"24.11 SlurmUser", slurmproto.Version2411, logVerbose, slurmUser, logVerbose, false},
		{"24.11 caps at debug2", slurmproto.Version2411, logDebug3, 0, logDebug2, false},
		{"24.11 ordinary user refused", slurmproto.Version2411, logDebug, 1001, logError, true},
		{"26.05 error asked by a user", slurmproto.Version2605, logError, 1001, logError, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, refused := stderrLevel(tc.version, uint16(tc.debug), tc.uid, slurmUser)
			if got != tc.want || refused != tc.refused {
				t.Errorf("stderrLevel = %d, %v; want %d, %v", got, refused, tc.want, tc.refused)
			}
		})
	}
}

func TestStepdLog_Format(t *testing.T) {
	for _, tc := range []struct {
		version uint16
		want    string
	}{
		{slurmproto.Version2205, "^slurmstepd-n1: error: e1\nslurmstepd-n1: v1\nslurmstepd-n1: debug:  d1\n$"},
		{slurmproto.Version2605, `^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] error: e1\n\[[^]]+\] v1\n\[[^]]+\] debug:  d1\n$`},
	} {
		path := filepath.Join(t.TempDir(), "err")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		s := &Step{spec: &stepapi.StartSpec{NodeName: "n1", ProtocolVersion: tc.version}, log: hclog.NewNullLogger(), stderr: f, errLevel: logDebug}
		s.stepdLog(logError, "e%d", 1)
		s.stepdLog(logVerbose, "v%d", 1)
		s.stepdLog(logDebug, "d%d", 1)
		s.stepdLog(logDebug2, "not shown")
		f.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(tc.want).Match(b) {
			t.Errorf("0x%04x: stderr %q, want %s", tc.version, b, tc.want)
		}
	}
}

// TestSayUnprovided: binding asked under TaskPlugin=task/affinity and a CPU
// frequency on a node with cpufreq get an error line on the step's stderr;
// under task/none, without cpufreq, or with no binding asked, nothing (as
// stock, which then does nothing either).
func TestSayUnprovided(t *testing.T) {
	freq := t.TempDir()
	for _, tc := range []struct {
		name    string
		plugin  string
		launch  slurmproto.LaunchTasks
		cpufreq string
		want    []string
	}{
		{"affinity, cores and local", "task/affinity", slurmproto.LaunchTasks{CPUBindType: 0x0004 | 0x0001, MemBindType: 0x20}, "/nonexistent", []string{"--cpu-bind is not applied", "--mem-bind is not applied"}},
		{"affinity, verbose and none only", "task/affinity,task/cgroup", slurmproto.LaunchTasks{CPUBindType: 0x0001 | 0x0020, MemBindType: 0x02}, "/nonexistent", nil},
		{"task/none binds nothing on stock either", "task/none", slurmproto.LaunchTasks{CPUBindType: 0x0004}, "/nonexistent", nil},
		{"cpu-freq with cpufreq", "task/none", slurmproto.LaunchTasks{CPUFreqMin: slurmproto.NoVal, CPUFreqMax: 2000000, CPUFreqGov: slurmproto.NoVal}, freq, []string{"--cpu-freq is not applied"}},
		{"cpu-freq without cpufreq", "task/none", slurmproto.LaunchTasks{CPUFreqMax: 2000000}, "/nonexistent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := cpufreqDir
			cpufreqDir = tc.cpufreq
			defer func() { cpufreqDir = old }()
			path := filepath.Join(t.TempDir(), "err")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			launch := tc.launch
			s := &Step{spec: &stepapi.StartSpec{NodeName: "n1", ProtocolVersion: slurmproto.Version2411, TaskPlugin: tc.plugin}, launch: &launch, log: hclog.NewNullLogger(), stderr: f}
			s.sayUnprovided()
			f.Close()
			b, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(tc.want) == 0 {
				if len(b) != 0 {
					t.Fatalf("stderr %q, want nothing", b)
				}
				return
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("stderr %q, want %d lines", b, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], "slurmstepd-n1: error: ") || !strings.Contains(lines[i], w) {
					t.Errorf("line %q, want an error line with %q", lines[i], w)
				}
			}
		})
	}
}
