//go:build linux && cgo

package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu/gpumock"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

var releases = []struct {
	name string
	v    uint16
}{{"22.05", slurmproto.Version2205}, {"24.11", slurmproto.Version2411}, {"26.05", slurmproto.Version2605}}

var autoFlags = gres.Flags{EnvNVML: true, Autodetected: true}

// nvmlReq is what gres.Load asks on a 224-CPU DGX for AutoDetect=nvml.
var nvmlReq = gres.DetectRequest{AutoDetect: gres.AutoDetectNVML, CPUs: 224}

func openMock(t *testing.T, m *gpumock.Machine, o Options) Provider {
	t.Helper()
	if o.CPUMap == nil {
		o.CPUMap = NewCPUMap(gpumock.DGXH100Cores())
	}
	o.Logger = hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Debug})
	p := OpenLibrary(m, o)
	if p.Reason() != "" {
		t.Fatalf("mock NVML fell back to Null: %s", p.Reason())
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func diffRecords(t *testing.T, got, want []gres.Record) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w gres.Record
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("record %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
	t.FailNow()
}

// TestDetect_DGXH100 compares the records of go-nvml's 8 x H100 mock with
// what gpu_nvml.c produces for that machine, by its rules: Type = NVML name
// lower-cased with '_' for ' ', File = /dev/nvidia<minor>, Cores = the
// abstract cores of the GPU's socket (GPUs 0-3 on socket 0 = cores 0-55),
// Links counting only NVLinks whose far end is another GPU's PCI bus id
// (all 18 go to NVSwitches on a DGX H100, so only the -1 of the GPU
// itself), Flags nvidia_gpu_env, and from 26.05 on UniqueId = GPU UUID.
func TestDetect_DGXH100(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			m := gpumock.NewDGXH100(gpumock.Options{})
			p := openMock(t, m, Options{Release: slurmproto.Version2205})
			// The daemon names records for the negotiated release.
			got, err := p.WithRelease(rel.v).Detect(context.Background(), nvmlReq)
			if err != nil {
				t.Fatal(err)
			}
			var want []gres.Record
			for i := 0; i < 8; i++ {
				links := []string{"0", "0", "0", "0", "0", "0", "0", "0"}
				links[i] = "-1"
				cores := "0-55"
				if i >= 4 {
					cores = "56-111"
				}
				r := gres.Record{Name: "gpu", Type: "nvidia_h100_80gb_hbm3", Count: 1, CPUCnt: 224,
					File: fmt.Sprintf("/dev/nvidia%d", i), Cores: cores, Links: strings.Join(links, ","), Flags: autoFlags}
				if rel.v >= slurmproto.Version2605 {
					r.UniqueID = m.GPUs[i].UUID
				}
				want = append(want, r)
			}
			diffRecords(t, got, want)
		})
	}
}

// TestDetect_DirectNVLinks: GPU i has two NVLinks to each of GPUs i+1, i+2,
// i+3 (mod 8) and the rest to NVSwitches; stock's Links count, per GPU in
// PCI order, the active links whose far end is that GPU. Minors that differ
// from the index are used for File.
func TestDetect_DirectNVLinks(t *testing.T) {
	m := gpumock.NewDGXH100(gpumock.Options{DirectNVLinks: true})
	for i, g := range m.GPUs {
		g.Minor = 7 - i
	}
	p := openMock(t, m, Options{Release: slurmproto.Version2411})
	got, err := p.Detect(context.Background(), nvmlReq)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		var l []string
		for k := 0; k < 8; k++ {
			switch d := (k - i + 8) % 8; {
			case d == 0:
				l = append(l, "-1")
			case d <= 3:
				l = append(l, "2")
			default:
				l = append(l, "0")
			}
		}
		if r.Links != strings.Join(l, ",") || r.File != fmt.Sprintf("/dev/nvidia%d", 7-i) {
			t.Errorf("GPU %d: Links %q File %q; want %q /dev/nvidia%d", i, r.Links, r.File, strings.Join(l, ","), 7-i)
		}
	}
	devs, err := p.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 || devs[0].NVLinksToGPU != 6 || devs[0].NVLinksToSwitch != 12 || devs[0].PCIBusID != "00000000:18:00.0" {
		t.Fatalf("Devices[0] = %+v", devs[0])
	}
}

// TestDetect_MIG: go-nvml's DGX A100 mock with GPU 0 split into 3g, 2g and
// 1g instances, GPU 1 into a 2g GPU instance with a 1-slice compute
// instance and GPU 2 into one 7g instance; GPUs 3-7 whole. Expected, per
// gpu_nvml.c: one record per MIG instance, Type = the GPU's type cut at
// its first '-' plus the profile (22.05: "_<g>g.<round(MB/1024)>gb" from
// the attributes, so A100-40GB's 7g (40192 MB) is 7g.39gb; 24.11 and 26.05:
// from the MIG device name, "_7g.40gb", "_1c.2g.10gb"), File = the GPU's
// file plus its GI and CI capability devices from mig-minors, UniqueId =
// the MIG device UUID (driver 550 >= 470.42.01), Cores of the GPU, Links =
// empty links of the MIG index in 22.05 and none later.
func TestDetect_MIG(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			m := gpumock.NewDGXA100(gpumock.Options{})
			must(t, m.EnableMIG(0,
				gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE},
				gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_2_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE},
				gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE}))
			must(t, m.EnableMIG(1, gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_2_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE}))
			must(t, m.EnableMIG(2, gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_7_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE}))
			minors := filepath.Join(t.TempDir(), "mig-minors")
			must(t, os.WriteFile(minors, []byte(m.MIGMinors()), 0o644))
			p := openMock(t, m, Options{Release: rel.v, MIGMinorsPath: minors})
			got, err := p.Detect(context.Background(), nvmlReq)
			if err != nil {
				t.Fatal(err)
			}
			old := rel.v < slurmproto.Version2411
			pick := func(a, b string) string {
				if old {
					return a
				}
				return b
			}
			links := func(s string) string {
				if old {
					return s
				}
				return ""
			}
			// MIG flags: 24.11 GRES_CONF_GLOBAL_INDEX; 26.05 GRES_CONF_MIG|UUID.
			migFlags := autoFlags
			migFlags.GlobalIndex = rel.v == slurmproto.Version2411
			migFlags.MIG = rel.v >= slurmproto.Version2605
			migFlags.UUID = rel.v >= slurmproto.Version2605
			mig := func(gpu int, typ, caps, link string, k int) gres.Record {
				return gres.Record{Name: "gpu", Type: typ, Count: 1, CPUCnt: 224,
					File:     fmt.Sprintf("/dev/nvidia%d,%s", gpu, caps),
					Cores:    map[bool]string{true: "0-55", false: "56-111"}[gpu < 4],
					Links:    links(link),
					UniqueID: fmt.Sprintf("MIG-%08x-0000-4000-8000-%012x", gpu, k),
					Flags:    migFlags}
			}
			// mig-minors as the mock numbers them: config 1, monitor 2, then
			// GPU 0 GI 0 = 3, its CI 0 = 4, GI 1 = 5, CI 6, GI 2 = 7, CI 8;
			// GPU 1 GI 0 = 9, CI 10; GPU 2 GI 0 = 11, CI 12.
			want := []gres.Record{
				mig(0, "mock_nvidia_a100_3g.20gb", "/dev/nvidia-caps/nvidia-cap3,/dev/nvidia-caps/nvidia-cap4", "-1,0,0", 0),
				mig(0, "mock_nvidia_a100_2g.10gb", "/dev/nvidia-caps/nvidia-cap5,/dev/nvidia-caps/nvidia-cap6", "0,-1,0", 1),
				mig(0, "mock_nvidia_a100_1g.5gb", "/dev/nvidia-caps/nvidia-cap7,/dev/nvidia-caps/nvidia-cap8", "0,0,-1", 2),
				mig(1, pick("mock_nvidia_a100_2g.10gb", "mock_nvidia_a100_1c.2g.10gb"), "/dev/nvidia-caps/nvidia-cap9,/dev/nvidia-caps/nvidia-cap10", "-1", 0),
				mig(2, pick("mock_nvidia_a100_7g.39gb", "mock_nvidia_a100_7g.40gb"), "/dev/nvidia-caps/nvidia-cap11,/dev/nvidia-caps/nvidia-cap12", "-1", 0),
			}
			for i := 3; i < 8; i++ {
				l := []string{"0", "0", "0", "0", "0", "0", "0", "0"}
				l[i] = "-1"
				r := gres.Record{Name: "gpu", Type: "mock_nvidia_a100-sxm4-40gb", Count: 1, CPUCnt: 224, File: fmt.Sprintf("/dev/nvidia%d", i),
					Cores: map[bool]string{true: "0-55", false: "56-111"}[i < 4], Links: strings.Join(l, ","), Flags: autoFlags}
				if rel.v >= slurmproto.Version2605 {
					r.UniqueID = m.GPUs[i].UUID
				}
				want = append(want, r)
			}
			diffRecords(t, got, want)
		})
	}
}

// TestDetect_MIGOldDriver: before driver 470.42.01 the UniqueId is
// "MIG-<GPU UUID>/<gi>/<ci>"; an instance missing from mig-minors is left
// out, as stock does.
func TestDetect_MIGOldDriver(t *testing.T) {
	m := gpumock.NewDGXA100(gpumock.Options{})
	m.DriverVersion = "460.91.03"
	must(t, m.EnableMIG(0,
		gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE},
		gpumock.MIGInstance{GIProfile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, CIProfile: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE}))
	minors := filepath.Join(t.TempDir(), "mig-minors")
	// Only the first instance is listed.
	must(t, os.WriteFile(minors, []byte("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"), 0o644))
	p := openMock(t, m, Options{Release: slurmproto.Version2411, MIGMinorsPath: minors})
	got, err := p.Detect(context.Background(), nvmlReq)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].UniqueID != "MIG-"+m.GPUs[0].UUID+"/0/0" || got[1].File != "/dev/nvidia1" {
		t.Fatalf("records %+v", got[:2])
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestOpen_InitFails: Init failing (the mock answers as go-nvml does on a
// node without libnvidia-ml) gives the Null provider and a log line saying
// why; no other NVML call follows (every other call of that mock panics).
func TestOpen_InitFails(t *testing.T) {
	for _, c := range []struct {
		ret  nvml.Return
		want string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1) not found"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "kernel driver not loaded"},
	} {
		m := gpumock.NewDGXH100(gpumock.Options{}).FailInit(c.ret)
		var log syncBuf
		p := OpenLibrary(m, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &log})})
		exerciseNull(t, p)
		if !strings.Contains(p.Reason(), c.want) || !strings.Contains(log.String(), "NVML Init failed") || !strings.Contains(log.String(), c.want) {
			t.Fatalf("reason %q, log %q; want %q", p.Reason(), log.String(), c.want)
		}
	}
}

// TestOpen_NoLibrary loads the real go-nvml library from a path that does
// not exist (what a node without the NVIDIA driver has): Null, logged, and
// the process lives on. Then the default search: on a machine without
// libnvidia-ml (this CI host) the same; on a GPU node, a real provider.
func TestOpen_NoLibrary(t *testing.T) {
	var log syncBuf
	p := Open(Options{LibraryPath: filepath.Join(t.TempDir(), "libnvidia-ml.so.1"), Logger: hclog.New(&hclog.LoggerOptions{Output: &log})})
	exerciseNull(t, p)
	if !strings.Contains(log.String(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Fatalf("log %q does not say why", log.String())
	}

	p = Open(Options{})
	defer p.Close()
	if haveNVML() {
		if p.Reason() != "" {
			t.Fatalf("libnvidia-ml is installed but Open fell back: %s", p.Reason())
		}
		return
	}
	exerciseNull(t, p)
}

// TestDetect_OtherLibraries: AutoDetect= values other than nvml are not
// implemented: gres.ErrNoLibrary, so the node registers gres.conf's GPUs.
func TestDetect_OtherLibraries(t *testing.T) {
	p := openMock(t, gpumock.NewDGXH100(gpumock.Options{}), Options{})
	for _, a := range []string{gres.AutoDetectRSMI, gres.AutoDetectOneAPI, gres.AutoDetectNVIDIA} {
		if recs, err := p.Detect(context.Background(), gres.DetectRequest{AutoDetect: a, CPUs: 224}); !errors.Is(err, gres.ErrNoLibrary) || recs != nil {
			t.Errorf("AutoDetect=%s: %v, %v", a, recs, err)
		}
	}
}

// haveNVML: is libnvidia-ml.so.1 where the dynamic loader finds it?
func haveNVML() bool {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"} {
		if _, err := os.Stat(filepath.Join(d, "libnvidia-ml.so.1")); err == nil {
			return true
		}
	}
	return false
}

func exerciseNull(t *testing.T, p Provider) {
	t.Helper()
	if _, ok := p.(Null); !ok || p.Reason() == "" {
		t.Fatalf("got %T (reason %q), want Null with a reason", p, p.Reason())
	}
	ctx, cancel := context.WithCancel(context.Background())
	recs, err := p.Detect(ctx, nvmlReq)
	if !errors.Is(err, gres.ErrNoLibrary) || recs != nil || !strings.Contains(err.Error(), p.Reason()) {
		t.Fatalf("Null Detect = %v, %v; want gres.ErrNoLibrary naming why", recs, err)
	}
	if s, err := p.Sample(ctx); err != nil || len(s) != 0 {
		t.Fatalf("Null Sample = %v, %v", s, err)
	}
	ch, err := p.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range ch {
		t.Fatal("Null sent an event")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
