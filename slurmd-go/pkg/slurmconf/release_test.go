package slurmconf

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func parseAs(t *testing.T, v uint16, text string) (*Config, error) {
	t.Helper()
	return Parse(strings.NewReader(text), "/etc/slurm/slurm.conf", Options{Version: v})
}

func TestLoad_Options(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Options
		want uint16
		err  bool
	}{
		{"none reads as 22.05", nil, V2205, false},
		{"24.11", []Options{{Version: V2411}}, V2411, false},
		{"26.05", []Options{{Version: V2605}}, V2605, false},
		{"lenient", []Options{{Version: Lenient}}, Lenient, false},
		{"23.02 is not read", []Options{{Version: 0x2700}}, 0, true},
		{"two Options", []Options{{Version: V2411}, {Version: V2605}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(head), "x.conf", tc.opts...)
			if tc.err {
				if !errors.Is(err, ErrVersion) {
					t.Fatalf("err = %v, want ErrVersion", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tc.want {
				t.Errorf("Version = %#x, want %#x", c.Version, tc.want)
			}
		})
	}
}

func TestRelease_Names(t *testing.T) {
	got := []string{Release(Lenient), Release(V2205), Release(V2411), Release(V2605), Release(0x2700)}
	want := []string{"lenient", "22.05", "24.11", "26.05", "0x2700"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Release = %q, want %q", got, want)
	}
}

// TestParse_LenientUnion: a file only the union of the releases reads.
func TestParse_LenientUnion(t *testing.T) {
	text := head + "SlurmctldPlugstack=/x\nMetricsType=metrics/openmetrics\nCoreSpecPlugin=core_spec/none\nSchedulerAuth=x\n"
	for _, v := range Versions {
		if _, err := parseAs(t, v, text); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s: err = %v, want ErrUnknownKey", Release(v), err)
		}
	}
	c, err := parseAs(t, Lenient, text)
	if err != nil {
		t.Fatal(err)
	}
	// CoreSpecPlugin is read by 22.05: kept. SchedulerAuth is defunct
	// wherever it exists: ignored, with the newest release's words.
	if c.Raw["corespecplugin"] != "core_spec/none" || c.Raw["slurmctldplugstack"] != "/x" {
		t.Errorf("Raw = %v", c.Raw)
	}
	want := []Warning{{File: "/etc/slurm/slurm.conf", Line: 6, Level: "error", Msg: `The option "SchedulerAuth" is defunct, please remove it from slurm.conf.`}}
	if !reflect.DeepEqual(c.Warnings, want) {
		t.Errorf("Warnings = %+v, want %+v", c.Warnings, want)
	}
	// Newest defaults; checks only some releases make are not applied.
	if c.TreeWidth != 16 || c.SelectType != "select/cons_tres" || c.TaskPlugin != "" {
		t.Errorf("TreeWidth %d SelectType %q TaskPlugin %q", c.TreeWidth, c.SelectType, c.TaskPlugin)
	}
	if _, err := parseAs(t, Lenient, head+"SelectType=select/linear\nTopologyPlugin=topology/tree\nAccountingStorageLoc=/x\n"); err != nil {
		t.Errorf("lenient applies a 24.11-only or removed-option check: %v", err)
	}
	if _, err := parseAs(t, Lenient, head+"FirstJobId=0\n"); !errors.Is(err, ErrInvalid) {
		t.Errorf("lenient skips a check every release makes: %v", err)
	}
}

func TestParse_DefunctPerRelease(t *testing.T) {
	text := head + "JobCredentialPrivateKey=/k\nGetEnvTimeout=5\n"
	for _, tc := range []struct {
		v        uint16
		key      string // JobCredentialPrivateKey as read
		warnings []string
	}{
		{V2205, "/k", nil},
		{V2411, "", []string{`/etc/slurm/slurm.conf:3: error: The option "JobCredentialPrivateKey" is defunct, please remove it from slurm.conf.`}},
		{V2605, "", []string{
			`/etc/slurm/slurm.conf:3: error: The option "JobCredentialPrivateKey" is defunct, please remove it from slurm.conf.`,
			`/etc/slurm/slurm.conf:4: error: The option "GetEnvTimeout" is defunct, please remove it from slurm.conf.`,
		}},
	} {
		t.Run(Release(tc.v), func(t *testing.T) {
			c, err := parseAs(t, tc.v, text)
			if err != nil {
				t.Fatal(err)
			}
			if c.JobCredentialPrivateKey != tc.key {
				t.Errorf("JobCredentialPrivateKey = %q, want %q", c.JobCredentialPrivateKey, tc.key)
			}
			var got []string
			for _, w := range c.Warnings {
				got = append(got, w.String())
			}
			if !reflect.DeepEqual(got, tc.warnings) {
				t.Errorf("Warnings = %q, want %q", got, tc.warnings)
			}
		})
	}
}

func TestParseError_Lines(t *testing.T) {
	_, err := parseAs(t, V2411, head+"BogusKey=1\n")
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	want := []string{"error: _parse_next_key: Parsing error at unrecognized key: BogusKey", "fatal: Unable to process configuration file"}
	if !reflect.DeepEqual(pe.Lines(), want) {
		t.Errorf("Lines = %q, want %q", pe.Lines(), want)
	}
	_, err = parseAs(t, V2411, head+"SelectType=select/linear\nTopologyPlugin=topology/tree\n")
	if !errors.As(err, &pe) || pe.Line != 4 || len(pe.Lines()) != 1 || !strings.HasPrefix(pe.Lines()[0], "fatal: select/linear with topology/tree") {
		t.Errorf("err = %v, lines %q", err, pe.Lines())
	}
}

// TestParse_IncludeBase: a nested relative Include, per release.
func TestParse_IncludeBase(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("slurm.conf", head+"Include sub/a.conf\n")
	write("sub/a.conf", "Include b.conf\n")
	write("sub/b.conf", "TmpFS=/next-to-including-file\n")
	write("b.conf", "TmpFS=/next-to-slurm.conf\n")
	for _, tc := range []struct {
		v    uint16
		want string
	}{{V2205, "/next-to-including-file"}, {V2411, "/next-to-slurm.conf"}, {V2605, "/next-to-slurm.conf"}} {
		c, err := Load(filepath.Join(dir, "slurm.conf"), Options{Version: tc.v})
		if err != nil {
			t.Fatalf("%s: %v", Release(tc.v), err)
		}
		if c.TmpFS != tc.want {
			t.Errorf("%s: TmpFS = %q, want %q", Release(tc.v), c.TmpFS, tc.want)
		}
	}
}

func TestParse_IncludeGlob(t *testing.T) {
	_, err := parseAs(t, V2411, head+"Include conf.d/*.conf\n")
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, ErrInclude) || pe.Line != 3 {
		t.Fatalf("err = %v", err)
	}
	want := "Slurm does not support glob parsing. /etc/slurm/conf.d/*.conf from slurm.conf will be skipped over. If this expected, ignore this message and set DebugFlags=GLOB_SILENCE in your slurm.conf."
	if pe.Msg != want {
		t.Errorf("Msg = %q, want %q", pe.Msg, want)
	}
	// 22.05 looks for a file of that name.
	if _, err := parseAs(t, V2205, head+"Include conf.d/*.conf\n"); !errors.As(err, &pe) || !strings.Contains(pe.Msg, "cannot stat file /etc/slurm/conf.d/*.conf") {
		t.Errorf("22.05: %v", err)
	}
}

func TestParse_PrologFlagsPerRelease(t *testing.T) {
	if _, err := parseAs(t, V2205, head+"PrologFlags=RunInJob\n"); err == nil {
		t.Error("22.05 took PrologFlags=RunInJob")
	}
	c, err := parseAs(t, V2411, head+"PrologFlags=RunInJob,Serial\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.PrologFlags != PrologAlloc|PrologContain|PrologRunInJob|PrologSerial {
		t.Errorf("PrologFlags = %#x", c.PrologFlags)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Msg != "PrologFlag Serial is incompatible with RunInJob" {
		t.Errorf("Warnings = %+v", c.Warnings)
	}
	for _, v := range []uint16{V2411, V2605} {
		c, err := parseAs(t, v, head+"PrologFlags=DeferBatch\n")
		if err != nil {
			t.Fatal(err)
		}
		want := PrologDeferBatch
		if v == V2605 {
			want |= PrologAlloc // 26.05: DeferBatch implies Alloc
		}
		if c.PrologFlags != want {
			t.Errorf("%s: PrologFlags = %#x, want %#x", Release(v), c.PrologFlags, want)
		}
	}
}

func TestSortTaskPlugins(t *testing.T) {
	for in, want := range map[string]string{
		"":                                "",
		"affinity":                        "task/affinity",
		"task/affinity,task/cgroup":       "task/cgroup,task/affinity",
		"cgroup,,affinity":                "task/cgroup,task/affinity",
		"task/affinity,cgroup,task/cray":  "task/cray,task/cgroup,task/affinity",
		"task/cgroup,task/affinity,extra": "task/extra,task/cgroup,task/affinity",
	} {
		if got := sortTaskPlugins(in); got != want {
			t.Errorf("sortTaskPlugins(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse_UnkillableDefault(t *testing.T) {
	for _, tc := range []struct {
		v    uint16
		msg  string
		want int
	}{{V2205, "30", 60}, {V2411, "10", 60}, {V2411, "30", 150}, {V2605, "30", 150}} {
		c, err := parseAs(t, tc.v, head+"MessageTimeout="+tc.msg+"\n")
		if err != nil {
			t.Fatal(err)
		}
		if got := int(c.UnkillableStepTimeout.Seconds()); got != tc.want {
			t.Errorf("%s MessageTimeout=%s: UnkillableStepTimeout = %d, want %d", Release(tc.v), tc.msg, got, tc.want)
		}
	}
}

func TestLoadCgroup_Missing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cgroup.conf")
	for _, tc := range []struct {
		v      uint16
		plugin string
	}{{V2205, ""}, {V2411, "autodetect"}, {V2605, "autodetect"}} {
		c, err := LoadCgroup(path, Options{Version: tc.v})
		if err != nil {
			t.Fatal(err)
		}
		if c.Exists || c.Plugin != tc.plugin || c.Mountpoint != "/sys/fs/cgroup" || c.AllowedRAMSpace != 100 || c.MemorySwappiness != NoVal64 {
			t.Errorf("%s: %+v", Release(tc.v), c)
		}
	}
}

func TestCgroupConf_Disabled(t *testing.T) {
	for _, tc := range []struct {
		v    uint16
		want bool
	}{{V2205, false}, {V2411, true}, {V2605, true}, {Lenient, true}} {
		c, err := ParseCgroup(strings.NewReader("CgroupPlugin=disabled\n"), "cgroup.conf", Options{Version: tc.v})
		if err != nil {
			t.Fatal(err)
		}
		if c.Disabled() != tc.want {
			t.Errorf("%s: Disabled = %v", Release(tc.v), c.Disabled())
		}
	}
}

func TestParseCgroup_Errors(t *testing.T) {
	_, err := ParseCgroup(strings.NewReader("ConstrainRAMSpace=yes\nConstrainKmemSpace=no\n"), "/etc/slurm/cgroup.conf", Options{Version: V2411})
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, ErrUnknownKey) || pe.Line != 2 {
		t.Fatalf("err = %v", err)
	}
	want := []string{"error: _parse_next_key: Parsing error at unrecognized key: ConstrainKmemSpace",
		"fatal: Could not open/read/parse cgroup.conf file /etc/slurm/cgroup.conf"}
	if !reflect.DeepEqual(pe.Lines(), want) {
		t.Errorf("Lines = %q, want %q", pe.Lines(), want)
	}
	if _, err := ParseCgroup(strings.NewReader("MaxRAMPercent=1e99\n"), "c", Options{Version: V2411}); !errors.As(err, &pe) || pe.Msg != "MaxRAMPercent value (1e99) is out of range" {
		t.Errorf("overflow: %v", err)
	}
}

func TestParseFloat(t *testing.T) {
	for in, want := range map[string]float32{"90": 90, "95.5": 95.5, " 1e1": 10, "0x10": 16, "0x1p3": 8, "-2": -2} {
		got, err := parseFloat("K", in)
		if err != nil || got != want {
			t.Errorf("parseFloat(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "1_0", "9 ", "1e1x"} {
		if _, err := parseFloat("K", in); err == nil {
			t.Errorf("parseFloat(%q) accepted", in)
		}
	}
}
