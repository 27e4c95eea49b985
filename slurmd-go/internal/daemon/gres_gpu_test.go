//go:build linux && cgo

package daemon

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu/gpumock"
)

// TestPrintGres_NVMLMock: `slurmd-go -G` with gres.conf AutoDetect=nvml on
// go-nvml's 8 x H100 mock (what bin/slurmd-go-nvmlmock runs) prints one
// record per GPU with gpu/nvml's Type, File, Links and the GPU's Cores, for
// each release; on a node without NVML the same files print no GPU and the
// loader says why.
func TestPrintGres_NVMLMock(t *testing.T) {
	for _, rel := range []string{"22.05", "24.11", "26.05"} {
		t.Run(rel, func(t *testing.T) {
			t.Setenv(ProtocolEnv, rel)
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "node.conf"), []byte("GresTypes=gpu\nNodeName=t1 CPUs=2 Gres=gpu:nvidia_h100_80gb_hbm3:8\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "gres.conf"), []byte("AutoDetect=nvml\n"), 0o644)
			out, err := exec.Command("bash", filepath.Join(stockCases, "slurm.conf.sh"), dir).Output()
			if err != nil {
				t.Fatalf("slurm.conf.sh: %v", err)
			}
			out = append(out, []byte("SlurmdUser="+currentUser(t)+"\n")...)
			os.WriteFile(filepath.Join(dir, "slurm.conf"), out, 0o644)
			cfg, err := config.LoadAs(config.Flags{ConfFile: filepath.Join(dir, "slurm.conf"), NodeName: "t1"}, startRelease())
			if err != nil {
				t.Fatal(err)
			}
			// The mock's GPUs are local to the host's CPUs, as in the
			// nvmlmock build.
			cm, err := gpu.ReadCPUMap("/")
			if err != nil {
				t.Fatal(err)
			}
			var cpus []int
			for c := 0; c <= cm.MaxCPU(); c++ {
				cpus = append(cpus, c)
			}
			half := (len(cpus) + 1) / 2
			m := gpumock.NewDGXH100(gpumock.Options{SocketCPUs: [][]int{cpus[:half], cpus[len(cpus)-half:]}})
			p := gpu.OpenLibrary(m, gpu.Options{})
			defer p.Close()
			var buf bytes.Buffer
			if rc := printGres(&buf, cfg, p); rc != 0 {
				t.Fatalf("rc %d: %s", rc, buf.String())
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 8 {
				t.Fatalf("%d lines:\n%s", len(lines), buf.String())
			}
			for i, l := range lines {
				links := []string{"0", "0", "0", "0", "0", "0", "0", "0"}
				links[i] = "-1"
				for _, want := range []string{"Name=gpu", "Type=nvidia_h100_80gb_hbm3", fmt.Sprintf("File=/dev/nvidia%d", i), "Links=" + strings.Join(links, ",")} {
					if !strings.Contains(l+" ", " "+want+" ") {
						t.Errorf("line %d lacks %s: %q", i, want, l)
					}
				}
				if !regexp.MustCompile(` Cores=[0-9]`).MatchString(l) {
					t.Errorf("line %d has no Cores: %q", i, l)
				}
			}

			buf.Reset()
			null := gpu.OpenLibrary(gpumock.NewDGXH100(gpumock.Options{}).FailInit(12), gpu.Options{})
			printGres(&buf, cfg, null)
			if strings.Contains(buf.String(), "/dev/nvidia") || !strings.Contains(buf.String(), "ERROR_LIBRARY_NOT_FOUND") {
				t.Fatalf("a node without NVML printed GPUs or not why:\n%s", buf.String())
			}
			t.Logf("without NVML:\n%s", buf.String())
		})
	}
}
