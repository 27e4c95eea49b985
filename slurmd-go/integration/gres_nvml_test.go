//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
)

// h100Type is what gpu/nvml names the mock's "NVIDIA H100 80GB HBM3".
const h100Type = "nvidia_h100_80gb_hbm3"

// mockGresConf is the static gres.conf that describes the GPUs of
// bin/slurmd-go-nvmlmock as stock's gpu/nvml would find them on this host:
// 8 GPUs of Type nvidia_h100_80gb_hbm3, GPUs 0-3 local to the host's first
// socket and 4-7 to its last (as the nvmlmock build wires the
// mock's affinity), all NVLinks to NVSwitches (Links only the -1 of each
// GPU itself). The stock reference reads it; slurmd-go autodetects.
func mockGresConf(t *testing.T, dev string) []string {
	t.Helper()
	sk := socketCores(t)
	lo, hi := sk[0], sk[len(sk)-1]
	lines := []string{"AutoDetect=off"}
	for i := 0; i < 8; i++ {
		l := []string{"0", "0", "0", "0", "0", "0", "0", "0"}
		l[i] = "-1"
		c := lo
		if i >= 4 {
			c = hi
		}
		lines = append(lines, fmt.Sprintf("Name=gpu Type=%s File=%s/nvidia%d Cores=%s Links=%s", h100Type, dev, i, c, strings.Join(l, ",")))
	}
	return lines
}

// socketCores is each socket's cores of this host in Slurm's abstract
// numbering ("0-1"): a gres.conf Cores= must cover whole sockets, or
// slurmctld (24.11 on) sets the node INVAL.
func socketCores(t *testing.T) []string {
	t.Helper()
	cm, err := gpu.ReadCPUMap("/")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cs := range cm.Sockets() {
		mask := make([]uint, cm.MaxCPU()/64+1)
		for _, c := range cs {
			mask[c/64] |= 1 << uint(c%64)
		}
		s, err := cm.Cores(mask)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatal("no socket in /sys/devices/system/cpu")
	}
	return out
}

// TestGres_NVMLMock: slurmd-go built with go-nvml's 8 x H100 mock
// (bin/slurmd-go-nvmlmock, `make nvmlmock`) and gres.conf AutoDetect=nvml
// registers the same Gres, GresUsed and CfgTRES at slurmctld, on its
// first registration, as the stock daemon given those GPUs in a static
// gres.conf (Type, Cores, Links as gpu/nvml names them); then a node
// without libnvidia-ml (the production binary on this host) under
// AutoDetect=nvml registers without GPUs as stock does, and its log says why.
func TestGres_NVMLMock(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Mock", func(t *testing.T) {
		bin := filepath.Join(root, "bin", "slurmd-go-nvmlmock")
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v (run `make nvmlmock`)", bin, err)
		}
		t.Setenv(cluster.EnvSlurmdBin, bin)
		dev := gresDevices(t, 8)
		p := startPair(t, func(impl string) cluster.Options {
			gc := []string{"AutoDetect=nvml"}
			if impl == cluster.ImplStock {
				gc = mockGresConf(t, dev)
			}
			return cluster.Options{Impl: impl, Nodes: 2, ExtraConf: []string{"GresTypes=gpu"},
				NodeExtra: "Gres=gpu:" + h100Type + ":8", GresConf: gc}
		})
		for _, n := range []string{"t1", "t2"} {
			compareGres(t, p, n)
		}
		if g := p.ref.ShowNode(t, "t1")["Gres"]; !strings.Contains(g, "gpu:"+h100Type+":8") {
			t.Errorf("reference t1: Gres=%q lacks gpu:%s:8", g, h100Type)
		}
		b, _ := os.ReadFile(p.sut.NodeOut("t1"))
		if !strings.Contains(string(b), "NVML is a mock") {
			t.Errorf("t1 did not run the mock (%s)", p.sut.NodeOut("t1"))
		}
	})
	t.Run("NoLibrary", func(t *testing.T) {
		p := startPair(t, func(impl string) cluster.Options {
			return cluster.Options{Impl: impl, Nodes: 1, ExtraConf: []string{"GresTypes=gpu"}, GresConf: []string{"AutoDetect=nvml"}}
		})
		compareGres(t, p, "t1")
		ref, sut := onBoth(p, func(c *cluster.Cluster) map[string]string { return c.ShowNode(t, "t1") })
		if ref["State"] != sut["State"] || sut["Gres"] != "(null)" {
			t.Errorf("t1: State %q Gres %q on slurmd-go, State %q on stock", sut["State"], sut["Gres"], ref["State"])
		}
		var log strings.Builder
		for _, f := range []string{p.sut.NodeLog("t1"), p.sut.NodeOut("t1")} {
			b, _ := os.ReadFile(f)
			log.Write(b)
		}
		if !strings.Contains(log.String(), "libnvidia-ml.so.1) not found") {
			t.Errorf("slurmd-go's log does not say why no GPU was found:\n%s", tail(log.String(), 20))
		}
	})
}
