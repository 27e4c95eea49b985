//go:build linux && cgo && nvmlreal

package gpu

// The real-NVML check bench/gpu/device-check.sh runs on a GPU machine
// (built there or here with `go test -c -tags nvmlreal`). It is not part of
// `go test ./...`: without a GPU it must fail, not skip.

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// loadReadyTimeout bounds the wait for the CUDA load to hold its memory.
const loadReadyTimeout = 90 * time.Second

type smiGPU struct {
	name, uuid, bus                   string
	memUsed, temp, util               float64
	power, smClock, memClock, memFree float64
}

// smi queries nvidia-smi, the reference.
func smi(t *testing.T) []smiGPU {
	t.Helper()
	out, err := exec.Command("nvidia-smi", "--query-gpu=name,uuid,pci.bus_id,memory.used,memory.free,temperature.gpu,utilization.gpu,power.draw,clocks.sm,clocks.mem",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		t.Fatalf("nvidia-smi: %v", err)
	}
	var gs []smiGPU
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ", ")
		if len(f) != 10 {
			t.Fatalf("nvidia-smi line %q", line)
		}
		num := func(s string) float64 { v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64); return v }
		gs = append(gs, smiGPU{name: f[0], uuid: f[1], bus: f[2], memUsed: num(f[3]), memFree: num(f[4]), temp: num(f[5]),
			util: num(f[6]), power: num(f[7]), smClock: num(f[8]), memClock: num(f[9])})
	}
	return gs
}

func TestReal_DetectAndSample(t *testing.T) {
	rel := slurmproto.Version2411
	if s := os.Getenv("TIEE_SLURM_RELEASE"); s != "" {
		v, err := slurmproto.ParseRelease(s)
		if err != nil {
			t.Fatal(err)
		}
		rel = v
	}
	p := Open(Options{Release: rel, Logger: hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Debug})})
	defer p.Close()
	if p.Reason() != "" {
		t.Fatalf("no NVML on a GPU machine: %s", p.Reason())
	}
	ref := smi(t)
	recs, err := p.Detect(context.Background(), gres.DetectRequest{AutoDetect: gres.AutoDetectNVML})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < len(ref) {
		t.Fatalf("%d records for %d GPUs", len(recs), len(ref))
	}
	for i, r := range recs {
		// As slurmd -G prints them.
		t.Logf("GRES: Name=%s Type=%s Count=%d File=%s Cores=%s Links=%s UniqueId=%s Flags=nvidia_gpu_env", r.Name, r.Type, r.Count, r.File, r.Cores, r.Links, r.UniqueID)
		for _, f := range strings.Split(r.File, ",") {
			if st, err := os.Stat(f); err != nil || st.Mode()&os.ModeDevice == 0 {
				t.Errorf("record %d: %s is no device file (%v)", i, f, err)
			}
		}
		if r.Cores == "" {
			t.Errorf("record %d: no Cores", i)
		}
	}
	devs, err := p.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range devs {
		t.Logf("device %d: %s %s %s minor=%d mig=%v nvlinks gpu=%d switch=%d fabric=%+v", d.Index, d.Name, d.UUID, d.PCIBusID, d.Minor, d.MIG, d.NVLinksToGPU, d.NVLinksToSwitch, d.Fabric)
		if i < len(ref) && (d.UUID != ref[i].uuid || d.PCIBusID != ref[i].bus || d.Name != ref[i].name) {
			t.Errorf("GPU %d: NVML %s %s %q, nvidia-smi %s %s %q", i, d.UUID, d.PCIBusID, d.Name, ref[i].uuid, ref[i].bus, ref[i].name)
		}
		if !d.MIG && i < len(recs) && recs[i].Type != typeName(ref[i].name) {
			t.Errorf("GPU %d: Type %q, want %q", i, recs[i].Type, typeName(ref[i].name))
		}
	}

	load := os.Getenv("TIEE_GPU_LOAD")
	if load == "" {
		t.Fatal("TIEE_GPU_LOAD (the cudaload binary) not set")
	}
	cmd := exec.Command(load, "4096", "30")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "cudaload: ready") {
				ready <- sc.Text()
				return
			}
		}
		close(ready)
	}()
	select {
	case l, ok := <-ready:
		if !ok {
			t.Fatal("cudaload exited before it was ready")
		}
		t.Log(l)
	case <-time.After(loadReadyTimeout):
		t.Fatalf("cudaload not ready within %v", loadReadyTimeout)
	}
	ss, err := p.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ref = smi(t)
	s := ss[0]
	t.Logf("sample GPU 0: %+v", s)
	t.Logf("nvidia-smi GPU 0: %+v", ref[0])
	found := false
	for _, pr := range s.Processes {
		found = found || int(pr.PID) == cmd.Process.Pid
	}
	if !found {
		t.Errorf("cudaload pid %d not among GPU 0's processes %+v", cmd.Process.Pid, s.Processes)
	}
	near := func(what string, got, want, tol float64) {
		ok := math.Abs(got-want) <= tol
		t.Logf("compare %-10s NVML %10.1f nvidia-smi %10.1f tolerance %6.1f %s", what, got, want, tol, map[bool]string{true: "ok", false: "MISMATCH"}[ok])
		if !ok {
			t.Errorf("%s: %v vs nvidia-smi %v", what, got, want)
		}
	}
	near("fb_used", float64(s.FBUsedMiB), ref[0].memUsed, math.Max(256, 0.05*ref[0].memUsed))
	near("fb_free", float64(s.FBFreeMiB), ref[0].memFree, math.Max(256, 0.05*ref[0].memFree))
	near("temp", float64(s.TempC), ref[0].temp, 5)
	near("power", s.PowerW, ref[0].power, math.Max(30, 0.25*ref[0].power))
	near("sm_clock", float64(s.SMClockMHz), ref[0].smClock, math.Max(150, 0.15*ref[0].smClock))
	near("mem_clock", float64(s.MemClockMHz), ref[0].memClock, math.Max(150, 0.15*ref[0].memClock))
	near("util", float64(s.GPUUtil), ref[0].util, 50) // both are 1-second windows taken moments apart
	if s.FBUsedMiB < 4096 {
		t.Errorf("FB used %d MiB while cudaload holds 4096", s.FBUsedMiB)
	}
	if out := os.Getenv("GPU_CHECK_OUT"); out != "" {
		f, _ := os.Create(out + "/sample.txt")
		fmt.Fprintf(f, "%+v\n%+v\n", s, ref[0])
		f.Close()
	}
}
