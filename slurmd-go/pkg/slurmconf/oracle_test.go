package slurmconf

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// render prints c in the line format of testdata/oracle/oracle.c, which
// prints what the real Slurm 22.05 library (libslurmfull) makes of a file.
func render(c *Config) string {
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
	p("taskplugin %s", c.TaskPlugin)
	p("select %s", c.SelectType)
	p("authtype %s", c.AuthType)
	p("credtype %s", c.CredType)
	p("mpidefault %s", c.MpiDefault)
	p("prologflags %d", c.PrologFlags)
	p("slurmuser %s %d", c.SlurmUser, c.SlurmUserID)
	p("rlimits %s", null(c.PropagateResourceLimits))
	p("ret2service %d", c.ReturnToService)
	p("maxtasks %d", c.MaxTasksPerNode)
	p("slurmddebug %d", c.SlurmdDebug)
	p("prolog %s", null(c.Prolog))
	p("epilog %s", null(c.Epilog))
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

// TestLoad_MatchesSlurmLibrary compares every testdata/{good,bad} config with
// what libslurm 22.05.8 produced for it (testdata/oracle/gen.sh).
func TestLoad_MatchesSlurmLibrary(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.conf")
	if err != nil || len(files) < 20 {
		t.Fatalf("testdata: %v, %d files", err, len(files))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			want, err := os.ReadFile(f + ".oracle")
			if err != nil {
				t.Fatalf("missing oracle output (run testdata/oracle/gen.sh): %v", err)
			}
			c, err := Load(f)
			if string(want) == "error\n" {
				if err == nil {
					t.Fatalf("Slurm rejects %s, Load accepted it", f)
				}
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v is not a *ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Slurm accepts %s, Load: %v", f, err)
			}
			if got := render(c); got != string(want) {
				t.Errorf("mismatch with Slurm's library\n--- got\n%s--- want\n%s", got, want)
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
	files, _ := filepath.Glob("testdata/*/*.conf")
	for _, f := range files {
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
