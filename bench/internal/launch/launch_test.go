package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHWAttrs(t *testing.T) {
	out := "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\nUpTime=0-01:00:00\n"
	if got, want := hwAttrs(out), "CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"; got != want {
		t.Fatalf("hwAttrs = %q, want %q", got, want)
	}
}

func TestRenderConf(t *testing.T) {
	c := &Cluster{Dir: "/tmp/x", Name: "tbabc", CtldPort: 28001, MungeSocket: "/tmp/x/munge/munge.socket", HWLine: "CPUs=2",
		opts:  Options{SlurmdDebug: "info"},
		Nodes: []*Node{{NodeSpec: NodeSpec{Name: "bstock", Impl: ImplStock}, Port: 28002}, {NodeSpec: NodeSpec{Name: "bgo", Impl: ImplGo}, Port: 28003}}}
	conf := c.renderConf(28004)
	for _, want := range []string{
		"AuthInfo=socket=/tmp/x/munge/munge.socket", "MessageTimeout=10", "SlurmdDebug=info",
		"NodeName=bstock NodeAddr=127.0.0.1 NodeHostname=localhost Port=28002 CPUs=2 State=UNKNOWN",
		"PartitionName=all Nodes=bstock,bgo Default=YES", "PartitionName=pbgo Nodes=bgo",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	if c.Partition("bgo") != "pbgo" {
		t.Fatal("Partition")
	}
	if strings.Contains(conf, "PartitionName=nbgo") {
		t.Errorf("a multi-node partition for a daemon without extra nodes:\n%s", conf)
	}
}

// A daemon's extra nodes (Of) join it in its multi-node partition, and in no other's.
func TestRenderConf_Nodeset(t *testing.T) {
	c := &Cluster{Dir: "/tmp/x", Name: "tbabc", CtldPort: 28001, HWLine: "CPUs=2", opts: Options{SlurmdDebug: "info"}}
	for i, s := range []NodeSpec{{Name: "bstock", Impl: ImplStock}, {Name: "bgo", Impl: ImplGo}, {Name: "bgonet", Impl: ImplGo},
		{Name: "bstock2", Impl: ImplStock, Of: "bstock"}, {Name: "bgo2", Impl: ImplGo, Of: "bgo"}, {Name: "bstock3", Impl: ImplStock, Of: "bstock"}} {
		c.Nodes = append(c.Nodes, &Node{NodeSpec: s, Port: 28002 + i})
	}
	conf := c.renderConf(28010)
	for _, want := range []string{"PartitionName=nbstock Nodes=bstock,bstock2,bstock3 MaxTime=INFINITE State=UP\n",
		"PartitionName=nbgo Nodes=bgo,bgo2 MaxTime=INFINITE State=UP\n", "PartitionName=pbstock2 Nodes=bstock2 "} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "PartitionName=nbgonet") || strings.Contains(conf, "PartitionName=nbstock2") {
		t.Errorf("a multi-node partition for a node without extra nodes:\n%s", conf)
	}
	if part, nodes := c.Nodeset("bgonet"); part != "nbgonet" || len(nodes) != 1 {
		t.Fatalf("Nodeset(bgonet) = %s %v", part, nodes)
	}
}

func TestParseStack(t *testing.T) {
	for _, c := range []struct {
		release, auth string
		tag, err      string
	}{
		{"22.05", "munge", "", ""},
		{"24.11", "slurm", "24.11-slurm", ""},
		{"22.05", "slurm", "", "auth/slurm does not exist in Slurm 22.05"},
		{"24.11", "munge", "", "24.11 with auth/slurm only"},
		{"26.05", "slurm", "", `release "26.05"`},
		{"24.11", "jwt", "", `auth "jwt"`},
	} {
		s, err := ParseStack(c.release, c.auth)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s/%s: error %v, want one containing %q", c.release, c.auth, err, c.err)
			}
			continue
		}
		if err != nil || s.Tag() != c.tag {
			t.Errorf("%s/%s: tag %q, err %v; want %q", c.release, c.auth, s.Tag(), err, c.tag)
		}
	}
	if DefaultStack.Root() != "" || (Stack{}).Root() != "" || !(Stack{}).UsesMunged() || (Stack{}).Protocol() != 0x2600 {
		t.Fatal("the zero Stack must behave as 22.05/munge on the host")
	}
	s := Stack{Release: Release2411, Auth: AuthSlurm}
	if s.Root() != "/var/lib/tiee/chroots/24.11" || s.Protocol() != 0x2A00 || s.UsesMunged() || s.Label() != "Slurm 24.11, auth/slurm" {
		t.Fatalf("24.11/slurm: root %q protocol %#x munged %v label %q", s.Root(), s.Protocol(), s.UsesMunged(), s.Label())
	}
}

// A 24.11 process runs in its own mount namespace, with its SACK directories over the
// chroot's, and execs (so the pid started is the daemon's); clients get slurmctld's SACK.
func TestCluster_Argv(t *testing.T) {
	dir := t.TempDir()
	host := &Cluster{Dir: dir}
	if got := host.argv("bgo", nil, "/bin/slurmd-go", "-D"); strings.Join(got, " ") != "/bin/slurmd-go -D" {
		t.Fatalf("host argv %q", got)
	}
	c := &Cluster{Dir: dir, Stack: Stack{Release: Release2411, Auth: AuthSlurm}}
	got := c.argv("bstock", nil, StockSlurmd, "-D", "-N", "bstock")
	want := []string{"unshare", "-m", "--propagation", "private", "sh", "-c", nsScript, "sh",
		dir + "/run/bstock/slurm", dir + "/run/bstock/slurmctld", "/var/lib/tiee/chroots/24.11",
		"/var/lib/tiee/chroots/24.11", StockSlurmd, "-D", "-N", "bstock"}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("daemon argv\n got %q\nwant %q", got, want)
	}
	cl := c.argv("client", []string{"--userspec=1:1"}, "srun", "true")
	if cl[8] != dir+"/run/client/slurm" || cl[9] != dir+"/run/slurmctld/slurmctld" || cl[11] != "--userspec=1:1" || cl[len(cl)-1] != "true" {
		t.Fatalf("client argv %q", cl)
	}
	for _, d := range []string{"run/bstock/slurm", "run/bstock/slurmctld", "run/client/slurm", "run/slurmctld/slurmctld"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s not created: %v", d, err)
		}
	}
	if s := c.SackSocket("slurmctld"); s != dir+"/run/slurmctld/slurmctld/sack.socket" {
		t.Errorf("slurmctld's SACK %q", s)
	}
	if s := c.SackSocket("bgo"); s != dir+"/run/bgo/slurm/sack.socket" {
		t.Errorf("bgo's SACK %q", s)
	}
	if host.SackSocket("bgo") != "" {
		t.Error("22.05 has no SACK")
	}
}

func TestRenderConf_AuthSlurm(t *testing.T) {
	c := &Cluster{Dir: "/tmp/x", Name: "tbabc", CtldPort: 32001, HWLine: "CPUs=2", Stack: Stack{Release: Release2411, Auth: AuthSlurm},
		opts: Options{SlurmdDebug: "info"}, Nodes: []*Node{{NodeSpec: NodeSpec{Name: "bgo", Impl: ImplGo}, Port: 32003}}}
	conf := c.renderConf(32004)
	for _, want := range []string{"AuthType=auth/slurm\n", "CredType=cred/slurm\n", "ClusterName=tbabc\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	for _, bad := range []string{"munge", "AuthInfo"} {
		if strings.Contains(conf, bad) {
			t.Errorf("auth/slurm slurm.conf has %q:\n%s", bad, conf)
		}
	}
	if cg := c.renderCgroupConf(); !strings.Contains(cg, "CgroupPlugin=disabled\n") {
		t.Errorf("24.11 cgroup.conf %q", cg)
	}
	if cg := (&Cluster{}).renderCgroupConf(); cg != "" {
		t.Errorf("22.05 gets no cgroup.conf, got %q", cg)
	}
}

func TestWriteKey(t *testing.T) {
	var keys [][]byte
	for i := 0; i < 2; i++ {
		c := &Cluster{Dir: t.TempDir()}
		if err := c.writeKey(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(c.KeyPath)
		if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != KeyBytes || filepath.Base(c.KeyPath) != "slurm.key" {
			t.Fatalf("slurm.key %s: %v %v", c.KeyPath, fi, err)
		}
		b, _ := os.ReadFile(c.KeyPath)
		keys = append(keys, b)
	}
	if string(keys[0]) == string(keys[1]) {
		t.Fatal("two clusters got the same slurm.key")
	}
}
