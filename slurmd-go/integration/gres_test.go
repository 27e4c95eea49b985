//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"golang.org/x/sys/unix"
)

// gresFatalTimeout bounds how long a node daemon takes to refuse a broken
// gres.conf and exit (both parse it right at start).
const gresFatalTimeout = 30 * time.Second

// gresDevices makes n character devices <dir>/nvidia0.. (major 195, the
// NVIDIA driver's, minor i) in a directory under /tmp, which the release
// chroots share: what the File= lines of the tests name.
func gresDevices(t *testing.T, n int) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "ti-gresdev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("nvidia%d", i))
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(i)))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
	}
	return dir
}

// gresConf is the gres.conf both clusters share among their nodes: typed
// GPUs (t1 and t2 the same tesla pair with Cores, different k80 lines, one
// with Links), a shard count spread over them, and lines for the dynamic
// node d1.
func gresConf(t *testing.T, dev string) []string {
	return []string{
		"AutoDetect=off",
		"NodeName=t[1-2] Name=gpu Type=tesla File=" + dev + "/nvidia[0-1] Cores=" + socketCores(t)[0],
		"NodeName=t1 Name=gpu Type=k80 File=" + dev + "/nvidia[2-3]",
		"NodeName=t2 Name=gpu Type=k80 File=" + dev + "/nvidia[2-3] Links=-1,0",
		"Name=shard Count=8",
		"NodeName=d1 Name=gpu Type=tesla File=" + dev + "/nvidia[4-5]",
	}
}

// gresNodeFields are what `scontrol show node` says about a node's GRES.
var gresNodeFields = []string{"Gres", "GresUsed", "GresDrain", "CfgTRES"}

// TestGres: static gres/gpu (typed, device files) and gres/shard from
// gres.conf. slurmctld shows the same Gres, GresUsed, GresDrain and
// CfgTRES for every node of the stock and the slurmd-go cluster, right
// after the first registration, for static nodes and a dynamic (-Z) one;
// a broken gres.conf line stops both daemons at start with the same fatal
// error (ours also names the file and line).
func TestGres(t *testing.T) {
	dev := gresDevices(t, 6)
	p := startPair(t, func(impl string) cluster.Options {
		return cluster.Options{
			Impl:      impl,
			Nodes:     2,
			ExtraConf: []string{"GresTypes=gpu,shard"},
			NodeExtra: "Gres=gpu:tesla:2,gpu:k80:2,shard:8",
			GresConf:  gresConf(t, dev),
		}
	})
	t.Run("Static", func(t *testing.T) {
		for _, n := range []string{"t1", "t2"} {
			compareGres(t, p, n)
		}
		ref := p.ref.ShowNode(t, "t1")
		// Guards against both sides registering nothing; slurmctld shows
		// the untyped shard count spread over the typed GPUs.
		for _, want := range []string{"gpu:tesla:2", "gpu:k80:2", "shard:tesla:4", "shard:k80:4"} {
			if !strings.Contains(ref["Gres"], want) {
				t.Errorf("reference t1: Gres=%q lacks %s (the stock daemon's behaviour changed?)", ref["Gres"], want)
			}
		}
	})
	t.Run("Dynamic", func(t *testing.T) {
		onBoth(p, func(c *cluster.Cluster) struct{} {
			c.StartDynamicNode(t, "d1", "Gres=gpu:tesla:2")
			c.WaitNodes(t, "idle", []string{"d1"}, dynamicNodeTimeout)
			return struct{}{}
		})
		compareGres(t, p, "d1")
		if g := p.ref.ShowNode(t, "d1")["Gres"]; !strings.Contains(g, "gpu:tesla:2") {
			t.Errorf("reference d1: Gres=%q lacks gpu:tesla:2", g)
		}
	})
	t.Run("BrokenLine", func(t *testing.T) {
		const want = "Invalid GRES record for gpu, invalid count 2x"
		logs := map[*cluster.Cluster]string{}
		for _, c := range p.both() {
			broken := append(gresConf(t, dev), "NodeName=t2 Name=gpu Type=tesla Count=2x")
			text := strings.Join(broken, "\n") + "\n"
			if err := os.WriteFile(c.GresConfPath(), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			c.KillNode(t, "t2", syscall.SIGTERM)
			c.StartNode(t, "t2")
			c.WaitFor(t, "t2 refuses the broken gres.conf", gresFatalTimeout, func() (bool, string) {
				return !c.NodeRunning("t2"), "t2 still running"
			})
			var all strings.Builder
			for _, f := range []string{c.NodeLog("t2"), c.NodeOut("t2")} {
				b, _ := os.ReadFile(f)
				all.Write(b)
			}
			logs[c] = all.String()
		}
		for _, c := range p.both() {
			if !regexp.MustCompile(`fatal: .*` + regexp.QuoteMeta(want)).MatchString(logs[c]) {
				t.Errorf("%s: t2's log and output lack %q:\n%s", p.label(c), "fatal: "+want, tail(logs[c], 20))
			}
		}
		// The broken line is the file's last.
		if where := fmt.Sprintf("%s:%d:", p.sut.GresConfPath(), len(gresConf(t, dev))+1); !strings.Contains(logs[p.sut], where) {
			t.Errorf("%s: the error does not name %s:\n%s", p.label(p.sut), where, tail(logs[p.sut], 20))
		}
	})
}

// compareGres checks that slurmctld shows node n's GRES alike on both.
func compareGres(t *testing.T, p pair, n string) {
	t.Helper()
	ref, sut := onBoth(p, func(c *cluster.Cluster) map[string]string { return c.ShowNode(t, n) })
	for _, k := range gresNodeFields {
		if ref[k] != sut[k] {
			t.Errorf("%s: %s=%q on the stock node, %q on slurmd-go", n, k, ref[k], sut[k])
		}
	}
	t.Logf("%s: Gres=%s GresUsed=%s CfgTRES=%s", n, ref["Gres"], ref["GresUsed"], ref["CfgTRES"])
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// gresPrintPrefix is the log prefix of -G's lines: "slurmd-<node>: " or a
// timestamp (26.05).
var gresPrintPrefix = regexp.MustCompile(`(?m)^(slurmd(-[a-z0-9]+)?: |\[[0-9T:.-]+\] )`)

// TestGres_PrintGres: `slurmd-go -G` prints what the release's stock
// `slurmd -G` prints for the same slurm.conf and gres.conf (timestamps
// aside), both run where that release's daemons run: the records with
// DebugFlags=Gres, and the fatal line for a broken gres.conf.
func TestGres_PrintGres(t *testing.T) {
	bin := os.Getenv(cluster.EnvSlurmdBin)
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "bin", "slurmd-go")
	}
	rel, err := cluster.SelectedRelease()
	if err != nil {
		t.Fatal(err)
	}
	dev := gresDevices(t, 6)
	for _, tc := range []struct {
		name  string
		lines []string
	}{
		{"Good", gresConf(t, dev)},
		{"Broken", append(gresConf(t, dev), "NodeName=t1 Name=gpu Type=k80 File="+dev+"/nvidia5 Bogus=1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("/tmp", "ti-gresprint-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			conf := strings.Join([]string{
				"ClusterName=gresprint", "SlurmctldHost=localhost", "SlurmctldPort=28492", "SlurmdPort=28493",
				"AuthType=auth/munge", "SlurmdSpoolDir=" + dir + "/spool", "StateSaveLocation=" + dir + "/state",
				"SlurmdPidFile=" + dir + "/slurmd.pid", "ProctrackType=proctrack/pgid", "TaskPlugin=task/none",
				"SelectType=select/cons_tres", "DebugFlags=Gres", "GresTypes=gpu,shard",
				"NodeName=t[1-2] NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:tesla:2,gpu:k80:2,shard:8",
				"PartitionName=p Nodes=ALL Default=yes",
			}, "\n") + "\n"
			for name, text := range map[string]string{"slurm.conf": conf, "gres.conf": strings.Join(tc.lines, "\n") + "\n"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(dir, "spool"), 0o755); err != nil {
				t.Fatal(err)
			}
			run := func(argv ...string) string {
				t.Helper()
				cmd, err := rel.Command(argv...)
				if err != nil {
					t.Fatal(err)
				}
				cmd.Env = append(os.Environ(), "TIEE_SLURM_PROTOCOL="+rel.Name)
				out, _ := cmd.CombinedOutput() // the broken case exits 1 on both
				return gresLines(string(out))
			}
			stock := run(cluster.StockSlurmd, "-G", "-N", "t1", "-f", filepath.Join(dir, "slurm.conf"))
			ours := run(bin, "-G", "-N", "t1", "-f", filepath.Join(dir, "slurm.conf"))
			if !strings.Contains(stock, "Gres Name=") && !strings.Contains(stock, "fatal:") {
				t.Fatalf("stock -G printed neither records nor a fatal line:\n%s", stock)
			}
			if ours != stock {
				t.Errorf("-G differs (Slurm %s)\nslurmd-go:\n%s\nstock:\n%s", rel.Name, ours, stock)
			}
		})
	}
}

// gresLines keeps -G's lines about GRES (records, gres.conf errors and
// the fatal line), prefixes stripped; stock's other start-up lines (cgroup
// and hwloc notes of this host) are not about GRES.
func gresLines(out string) string {
	var keep []string
	for _, l := range strings.Split(gresPrintPrefix.ReplaceAllString(out, ""), "\n") {
		if strings.HasPrefix(l, "Gres Name=") || strings.HasPrefix(l, "fatal:") ||
			strings.Contains(l, "gres.conf") || strings.Contains(l, "Parsing error") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
