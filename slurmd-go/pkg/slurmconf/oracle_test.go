package slurmconf

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The golden files next to every testdata/{good,bad,release}/X.conf and
// testdata/cgroup/{good,bad}/X.conf, per release R (22.05, 24.11, 26.05):
//
//	X.conf.oracle-R  what R's libslurm makes of the file (testdata/oracle/oracle.c)
//	X.conf.stock-R   what R's stock slurmd logs reading it (slurmd -G), normalized
//
// They are written from the real releases by oracle_integration_test.go:
//
//	go test -tags integration -run TestOracle ./slurmd-go/pkg/slurmconf/ -update

// cgroupConfMark stands for the cgroup.conf path in golden stock lines.
const cgroupConfMark = "@CGROUP_CONF@"

func globFiles(t *testing.T, pattern string, least int) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) < least {
		t.Fatalf("%s: %v, %d files", pattern, err, len(files))
	}
	return files
}

func confFiles(t *testing.T) []string { return globFiles(t, "testdata/*/*.conf", 40) }

func cgroupFiles(t *testing.T) []string { return globFiles(t, "testdata/cgroup/*/*.conf", 10) }

func golden(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file (go test -tags integration -run TestOracle -update): %v", err)
	}
	return string(b)
}

// render prints c in the line format of testdata/oracle/oracle.c built
// against release v.
func render(c *Config, v uint16) string {
	null := func(s string) string {
		if s == "" {
			return "(null)"
		}
		return s
	}
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	p("hash %d", c.Hash)
	p("cluster %s", c.ClusterName)
	for _, h := range c.SlurmctldHost {
		p("ctld %s %s", h.Name, h.Addr)
	}
	p("ctldport %d %d", c.SlurmctldPort, c.SlurmctldPortCount)
	p("slurmdport %d", c.SlurmdPort)
	p("timeouts msg=%d slurmd=%d killwait=%d batch=%d tcp=%d", int(c.MessageTimeout.Seconds()),
		int(c.SlurmdTimeout.Seconds()), int(c.KillWait.Seconds()), int(c.BatchStartTimeout.Seconds()), int(c.TCPTimeout.Seconds()))
	p("treewidth %d", c.TreeWidth)
	p("spool %s", c.SlurmdSpoolDir)
	p("pidfile %s", c.SlurmdPidFile)
	p("tmpfs %s", c.TmpFS)
	p("proctrack %s", c.ProctrackType)
	p("taskplugin %s", null(c.TaskPlugin))
	p("select %s", c.SelectType)
	p("authtype %s", c.AuthType)
	p("credtype %s", c.CredType)
	p("mpidefault %s", null(c.MpiDefault))
	p("prologflags %d", c.PrologFlags)
	p("slurmuser %s %d", c.SlurmUser, c.SlurmUserID)
	p("rlimits %s", null(c.PropagateResourceLimits))
	p("ret2service %d", c.ReturnToService)
	p("maxtasks %d", c.MaxTasksPerNode)
	p("slurmddebug %d", c.SlurmdDebug)
	scripts := func(what string, list []string) {
		if len(list) == 0 {
			p("%s (null)", what)
		}
		for _, s := range list {
			p("%s %s", what, s)
		}
	}
	scripts("prolog", c.Prologs)
	scripts("epilog", c.Epilogs)
	p("unkillable %d", int(c.UnkillableStepTimeout.Seconds()))
	p("jobacct %s", null(c.JobAcctGatherType))
	p("switch %s", null(c.SwitchType))
	if v >= V2605 {
		p("namespace %s", null(c.NamespaceType))
	} else {
		p("container %s", null(c.JobContainerType))
	}
	p("scripttimeouts prolog=%d epilog=%d", c.PrologTimeout, c.EpilogTimeout)
	if v >= V2411 {
		p("hash %s tls %s", null(c.HashPlugin), null(c.TLSType))
	}
	var line string
	for _, n := range c.Nodes() {
		if key := fmt.Sprintf("%s:%d", n.File, n.LineNo); key != line {
			line = key
			p("line %s cpus=%d boards=%d sockets=%d cores=%d threads=%d mem=%d tmp=%d weight=%d feature=%s gres=%s state=%s",
				n.Line, n.CPUs, n.Boards, n.Sockets, n.CoresPerSocket, n.ThreadsPerCore, n.RealMemory, n.TmpDisk,
				n.Weight, null(strings.Join(n.Features, ",")), null(n.Gres), null(n.State))
		}
		// The library looks addresses up by host name: the first node with
		// that NodeHostname wins.
		addr := n.Addr
		if h, ok := c.NodeByHost(n.Hostname); ok {
			addr = h.Addr
		}
		p("node %s addr=%s host=%s port=%d cpus=%d boards=%d sockets=%d cores=%d threads=%d",
			n.Name, addr, n.Hostname, n.Port, n.CPUs, n.Boards, n.Sockets, n.CoresPerSocket, n.ThreadsPerCore)
	}
	return b.String()
}

// renderCgroup prints c as oracle -c prints cgroup_get_conf_list of
// release v: sorted by name, each release's own formats.
func renderCgroup(c *CgroupConf, v uint16) string {
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	null := func(s string) string {
		if s == "" {
			return "(null)"
		}
		return s
	}
	pct := func(f float32) string { return fmt.Sprintf("%.1f%%", f) }
	mb := " MB"
	if v >= V2411 {
		mb = "MB"
	}
	swappiness := "(null)"
	if c.MemorySwappiness != NoVal64 {
		swappiness = fmt.Sprint(c.MemorySwappiness)
	}
	kv := map[string]string{
		"AllowedRAMSpace":        pct(c.AllowedRAMSpace),
		"AllowedSwapSpace":       pct(c.AllowedSwapSpace),
		"CgroupMountpoint":       null(c.Mountpoint),
		"CgroupPlugin":           null(c.Plugin),
		"ConstrainCores":         yn(c.ConstrainCores),
		"ConstrainDevices":       yn(c.ConstrainDevices),
		"ConstrainRAMSpace":      yn(c.ConstrainRAMSpace),
		"ConstrainSwapSpace":     yn(c.ConstrainSwapSpace),
		"IgnoreSystemd":          yn(c.IgnoreSystemd),
		"IgnoreSystemdOnFailure": yn(c.IgnoreSystemdOnFailure),
		"MaxRAMPercent":          pct(c.MaxRAMPercent),
		"MaxSwapPercent":         pct(c.MaxSwapPercent),
		"MemorySwappiness":       swappiness,
		"MinRAMSpace":            fmt.Sprintf("%d%s", c.MinRAMSpace, mb),
	}
	if v < V2411 {
		kv["CgroupAutomount"] = yn(c.Automount)
		kv["ConstrainKmemSpace"] = yn(c.ConstrainKmemSpace)
		kv["AllowedKmemSpace"] = "(null)"
		if c.AllowedKmemSpace >= 0 {
			kv["AllowedKmemSpace"] = fmt.Sprintf("%.0f Bytes", c.AllowedKmemSpace)
		}
		kv["MaxKmemPercent"] = pct(c.MaxKmemPercent)
		kv["MinKmemSpace"] = fmt.Sprintf("%d MB", c.MinKmemSpace)
	} else {
		kv["EnableControllers"] = yn(c.EnableControllers)
		kv["SystemdTimeout"] = fmt.Sprintf("%d ms", c.SystemdTimeout)
	}
	if v >= V2605 {
		kv["CgroupJobIdPaths"] = yn(c.CgroupJobIdPaths)
		kv["CgroupSlice"] = null(c.CgroupSlice)
		kv["EnableExtraControllers"] = null(c.EnableExtraControllers)
	}
	names := make([]string, 0, len(kv))
	for k := range kv {
		names = append(names, k)
	}
	sort.Strings(names) // sort_key_pairs: xstrcmp of the names
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "cgroup %s=%s\n", k, kv[k])
	}
	return b.String()
}

// reading is what slurmconf makes of one file as one release: the
// oracle's rendering of it (accepted files), its warnings, its error.
type reading struct {
	lib      string
	warnings []Warning
	err      error
}

func readConf(path string, v uint16) reading {
	c, err := Load(path, Options{Version: v})
	if err != nil {
		return reading{err: err}
	}
	return reading{lib: render(c, v), warnings: c.Warnings}
}

// readCgroup reads a cgroup.conf; messages name it @CGROUP_CONF@, as the
// golden stock lines do.
func readCgroup(path string, v uint16) reading {
	c, err := LoadCgroup(path, Options{Version: v})
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.Msg = strings.ReplaceAll(pe.Msg, path, cgroupConfMark)
			pe.Fatal = strings.ReplaceAll(pe.Fatal, path, cgroupConfMark)
		}
		return reading{err: err}
	}
	if !c.Exists {
		return reading{err: fmt.Errorf("%s: Exists = false", path)}
	}
	return reading{lib: renderCgroup(c, v), warnings: c.Warnings}
}

// compareLibrary checks a reading against the library's output (lib:
// "error\n" when it refused the file).
func compareLibrary(t *testing.T, file string, v uint16, r reading, lib string) {
	t.Helper()
	var pe *ParseError
	switch {
	case lib == "error\n" && r.err == nil:
		t.Errorf("Slurm %s's library rejects %s, slurmconf accepts it", Release(v), file)
	case lib == "error\n" && !errors.As(r.err, &pe):
		t.Errorf("error %v is not a *ParseError", r.err)
	case lib != "error\n" && r.err != nil:
		t.Errorf("Slurm %s's library accepts %s, slurmconf: %v", Release(v), file, r.err)
	case lib != "error\n" && r.lib != lib:
		t.Errorf("mismatch with Slurm %s's library\n--- got\n%s--- want\n%s", Release(v), r.lib, lib)
	}
}

// compareGoldens holds every file, read as each release, against what
// that release's library and stock slurmd said of it.
func compareGoldens(t *testing.T, files []string, read func(string, uint16) reading) {
	for _, f := range files {
		for _, v := range Versions {
			t.Run(f+"/"+Release(v), func(t *testing.T) {
				r := read(f, v)
				compareLibrary(t, f, v, r, golden(t, f+".oracle-"+Release(v)))
				compareStock(t, f, splitLines(golden(t, f+".stock-"+Release(v))), r.warnings, r.err)
			})
		}
	}
}

func TestLoad_MatchesReleases(t *testing.T) { compareGoldens(t, confFiles(t), readConf) }

func TestLoadCgroup_MatchesReleases(t *testing.T) { compareGoldens(t, cgroupFiles(t), readCgroup) }

// hostlistErrors are files whose first stock line comes from Slurm's
// hostlist parser, whose messages slurmconf does not copy; the fatal line
// after it must still match.
var hostlistErrors = map[string]bool{"testdata/bad/badhostlist.conf": true}

// compareStock checks what slurmconf says about a file against what the
// stock slurmd logged (golden X.conf.stock-R lines):
//   - a rejected file: stock ended on a fatal line; ours are its first
//     line (the cause) and its last (the fatal), as stock logs them;
//   - an accepted file: stock logged no fatal line, and its error and
//     warning lines are exactly our Warnings (in any order).
func compareStock(t *testing.T, file string, stock []string, warnings []Warning, err error) {
	t.Helper()
	fatal := len(stock) > 0 && strings.HasPrefix(stock[len(stock)-1], "fatal: ")
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("error %v is not a *ParseError", err)
		}
		if !fatal {
			t.Fatalf("stock slurmd accepts %s (logged %q); slurmconf: %v", file, stock, err)
		}
		ours := pe.Lines()
		if last := ours[len(ours)-1]; last != stock[len(stock)-1] {
			t.Errorf("fatal line\n got  %q\n want %q", last, stock[len(stock)-1])
		}
		if ours[0] != stock[0] && !hostlistErrors[file] {
			t.Errorf("first line\n got  %q\n want %q (stock: %q)", ours[0], stock[0], stock)
		}
		return
	}
	if fatal {
		t.Fatalf("stock slurmd rejects %s: %q; slurmconf accepts it", file, stock)
	}
	got := make([]string, 0, len(warnings))
	for _, w := range warnings {
		got = append(got, w.Text())
	}
	want := append([]string(nil), stock...)
	sort.Strings(got)
	sort.Strings(want)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings\n got  %q\n want %q", got, want)
	}
}

func splitLines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestLoad_LenientAcceptsWhatAnyReleaseAccepts: the lenient read takes
// every file one of the releases takes, and reports the newest defaults.
func TestLoad_LenientAcceptsWhatAnyReleaseAccepts(t *testing.T) {
	for _, f := range confFiles(t) {
		t.Run(f, func(t *testing.T) {
			var accepted []string
			for _, v := range Versions {
				if _, err := Load(f, Options{Version: v}); err == nil {
					accepted = append(accepted, Release(v))
				}
			}
			c, err := Load(f, Options{Version: Lenient})
			if len(accepted) > 0 && err != nil {
				t.Fatalf("%v accept %s; lenient: %v", accepted, f, err)
			}
			if err == nil && c.Version != Lenient {
				t.Errorf("Version = %#x, want Lenient", c.Version)
			}
		})
	}
}

// scontrolAccepts reports whether the installed scontrol (22.05) loads
// path. `scontrol show hostnames` needs no controller but parses the whole
// file and validates it (not the node address/port expansion).
func scontrolAccepts(t *testing.T, path string) (bool, string) {
	t.Helper()
	bin, err := exec.LookPath("scontrol")
	if err != nil {
		t.Fatalf("scontrol (slurm-client 22.05) is required by this test: %v", err)
	}
	abs, _ := filepath.Abs(path)
	cmd := exec.Command(bin, "show", "hostnames", "x")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+abs)
	out, err := cmd.CombinedOutput()
	return err == nil, string(out)
}

// nodeExpansionErrors are rejected by slurmd/slurmctld when they expand the
// node table; scontrol never expands it, so it accepts these files.
var nodeExpansionErrors = map[string]bool{
	"addrcount": true, "badhostlist": true, "badport": true, "badstate": true,
	"dupnode": true, "hostaddrcount": true, "portcount": true,
}

func TestLoad_AgreesWithScontrol(t *testing.T) {
	for _, f := range confFiles(t) {
		t.Run(f, func(t *testing.T) {
			_, ourErr := Load(f)
			ok, out := scontrolAccepts(t, f)
			base := strings.TrimSuffix(filepath.Base(f), ".conf")
			switch {
			case ourErr == nil && !ok:
				t.Errorf("scontrol rejects, Load accepts:\n%s", out)
			case ourErr != nil && ok && !nodeExpansionErrors[base]:
				t.Errorf("scontrol accepts, Load: %v", ourErr)
			case ourErr != nil && !ok:
				t.Logf("both reject: ours %v; scontrol: %s", ourErr, strings.TrimSpace(out))
			}
		})
	}
}

// TestLoad_DebianExamples parses the example configs shipped by Debian's
// slurm packages and checks the hash against the real library's value.
func TestLoad_DebianExamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		hash uint32 // from libslurm 22.05.8 (testdata/oracle/oracle.c)
	}{
		{"simple", "/usr/share/doc/slurmctld/examples/slurm.conf.simple.gz", 1960164981},
		{"cgroup", "/usr/share/doc/slurmctld/examples/slurm.conf.cgroup.gz", 2600346942},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := gunzip(t, tc.path)
			c, err := Parse(strings.NewReader(data), tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if c.Hash != tc.hash {
				t.Errorf("Hash = %d, want %d", c.Hash, tc.hash)
			}
			if c.ClusterName != "cluster" || c.SlurmctldHost[0].Name != "workstation" || c.ReturnToService != 2 {
				t.Errorf("unexpected values: %+v", c)
			}
			n, ok := c.Node("server")
			if !ok || n.CPUs != 16 || n.RealMemory != 64000 || n.Sockets != 16 || n.Port != 6818 {
				t.Errorf("node server = %+v", n)
			}
			if ps := c.Partitions(); len(ps) != 1 || ps[0].Name != "debug" || !ps[0].Default || ps[0].Nodes != "ALL" {
				t.Errorf("partitions = %+v", ps)
			}
			// And scontrol agrees that the file is valid.
			tmp := filepath.Join(t.TempDir(), "slurm.conf")
			if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			if ok, out := scontrolAccepts(t, tmp); !ok {
				t.Errorf("scontrol rejects the example: %s", out)
			}
		})
	}
}
