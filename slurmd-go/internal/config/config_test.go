package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

const testConf = `ClusterName=t
SlurmctldHost=ctl(127.0.0.1)
SlurmctldPort=7817
SlurmdPort=7000
SlurmUser=root
SlurmdSpoolDir=/var/spool/tiee/%n
SlurmdPidFile=/run/tiee/%n.pid
SlurmdLogFile=/var/log/tiee/%n.log
NodeName=n1 NodeAddr=127.0.0.1 Port=7001 CPUs=2
NodeName=n2 NodeAddr=127.0.0.1 Port=7002 CPUs=2
NodeName=solo NodeAddr=10.9.9.9 CPUs=2
PartitionName=p Nodes=ALL Default=YES
`

func writeConf(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoad_DynamicAlone: a dynamic node on a host that no slurm.conf node
// shares keeps refusing replayed credentials.
func TestLoad_DynamicAlone(t *testing.T) {
	conf := strings.ReplaceAll(testConf, "127.0.0.1", "10.9.9.8")
	cfg, err := Load(Flags{ConfFile: writeConf(t, conf), NodeName: "dyn1", Dynamic: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MultipleSlurmd {
		t.Fatalf("MultipleSlurmd set for a dynamic node alone on its host")
	}
}

func TestLoad_NodeResolution(t *testing.T) {
	p := writeConf(t, testConf)
	cases := []struct {
		name     string
		flags    Flags
		port     uint16
		multiple bool
		spool    string
	}{
		{"per-node port and %n paths", Flags{ConfFile: p, NodeName: "n2"}, 7002, true, "/var/spool/tiee/n2"},
		{"SlurmdPort default, own address", Flags{ConfFile: p, NodeName: "solo"}, 7000, false, "/var/spool/tiee/solo"},
		// n1 and n2 are on loopback: this machine, like the dynamic node.
		{"dynamic node not in slurm.conf", Flags{ConfFile: p, NodeName: "dyn1", Dynamic: true, DynamicConf: "Feature=dyn Port=7009"}, 7009, true, "/var/spool/tiee/dyn1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(c.flags)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Port != c.port || cfg.MultipleSlurmd != c.multiple || cfg.SpoolDir != c.spool {
				t.Fatalf("port %d multiple %v spool %s", cfg.Port, cfg.MultipleSlurmd, cfg.SpoolDir)
			}
			if len(cfg.CtldHosts) != 1 || cfg.CtldHosts[0] != "127.0.0.1:7817" {
				t.Fatalf("ctld hosts %v", cfg.CtldHosts)
			}
		})
	}
	cfg, _ := Load(Flags{ConfFile: p, NodeName: "n1", LogFile: "/tmp/x.log"})
	if cfg.LogFile != "/tmp/x.log" {
		t.Fatalf("-L did not win over SlurmdLogFile: %s", cfg.LogFile)
	}
	if a, ok := cfg.NodeAddr("n2"); !ok || a != "127.0.0.1:7002" {
		t.Fatalf("NodeAddr(n2) = %s %v", a, ok)
	}
	if a, ok := cfg.NodeAddr("solo"); !ok || a != "10.9.9.9:7000" {
		t.Fatalf("NodeAddr(solo) = %s %v", a, ok)
	}
}

func TestLoad_Errors(t *testing.T) {
	p := writeConf(t, testConf)
	if _, err := Load(Flags{ConfFile: p, NodeName: "nope"}); !errors.Is(err, ErrNoNodeName) {
		t.Fatalf("unknown node: %v", err)
	}
	bad := writeConf(t, "ClusterName=t\nSlurmctldHost=c\nNodeName=n1 CPUs=two\n")
	_, err := Load(Flags{ConfFile: bad, NodeName: "n1"})
	if err == nil || !strings.Contains(err.Error(), bad+":3") {
		t.Fatalf("broken line not reported with file and line: %v", err)
	}
}

// TestLoad_CgroupConf: cgroup.conf beside slurm.conf is read with it, as
// slurmd does; a broken one stops the daemon with slurmd's words.
func TestLoad_CgroupConf(t *testing.T) {
	p := writeConf(t, testConf)
	cfg, err := Load(Flags{ConfFile: p, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cgroup == nil || cfg.Cgroup.Exists || cfg.ConstrainRAMSpace() {
		t.Fatalf("no cgroup.conf: %+v, ConstrainRAMSpace %v", cfg.Cgroup, cfg.ConstrainRAMSpace())
	}
	cg := filepath.Join(filepath.Dir(p), "cgroup.conf")
	if err := os.WriteFile(cg, []byte("CgroupPlugin=autodetect\nConstrainRAMSpace=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err = Load(Flags{ConfFile: p, NodeName: "n1"}); err != nil || !cfg.ConstrainRAMSpace() {
		t.Fatalf("ConstrainRAMSpace=yes: %v, %v", cfg, err)
	}
	if err := os.WriteFile(cg, []byte("ConstrainRAMSpace=yes\nConstrainRAMSpace=perhaps\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(Flags{ConfFile: p, NodeName: "n1"})
	var pe *slurmconf.ParseError
	if !errors.As(err, &pe) || pe.File != cg || pe.Line != 2 {
		t.Fatalf("bad cgroup.conf: %v", err)
	}
	if want := `error: "perhaps" is not a valid option for "ConstrainRAMSpace"`; pe.Lines()[0] != want {
		t.Errorf("first line %q, want %q", pe.Lines()[0], want)
	}
}

// TestLoad_PathsPerNode: every path slurmd expands (slurm_conf_expand_slurmd_path:
// TmpFS, SlurmdSpoolDir, SlurmdPidFile, SlurmdLogFile) gets this node's name for
// its first %n and the host's short name for its first %h.
func TestLoad_PathsPerNode(t *testing.T) {
	conf := strings.Replace(testConf, "SlurmUser=root\n", "SlurmUser=root\nTmpFS=/scratch/%n/%h/%n\n", 1)
	conf = strings.Replace(conf, "SlurmdSpoolDir=/var/spool/tiee/%n", "SlurmdSpoolDir=/var/spool/%h/%n", 1)
	cfg, err := Load(Flags{ConfFile: writeConf(t, conf), NodeName: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Hostname
	for _, c := range []struct{ key, got, want string }{
		{"TmpFS", cfg.TmpFS, "/scratch/n2/" + h + "/%n"},
		{"SlurmdSpoolDir", cfg.SpoolDir, "/var/spool/" + h + "/n2"},
		{"SlurmdPidFile", cfg.PidFile, "/run/tiee/n2.pid"},
		{"SlurmdLogFile", cfg.LogFile, "/var/log/tiee/n2.log"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.key, c.got, c.want)
		}
	}
	if cfg.Conf.TmpFS != "/scratch/%n/%h/%n" {
		t.Errorf("slurm.conf's TmpFS changed to %q: slurmctld's value is the pattern", cfg.Conf.TmpFS)
	}
}
