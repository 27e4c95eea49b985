package gres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDetector answers Detect with a fixed list (or error) and records the
// request.
type fakeDetector struct {
	recs []Record
	err  error
	req  *DetectRequest
}

func (f *fakeDetector) Detect(_ context.Context, req DetectRequest) ([]Record, error) {
	f.req = &req
	return f.recs, f.err
}

var _ Detector = (*fakeDetector)(nil)

// h100s are three GPUs as an NVML detector reports them: long type names,
// PCI order in Links, no HAS_FILE/HAS_TYPE (the loader sets them, as
// add_gres_to_list does).
func h100s() []Record {
	links := []string{"-1,18,18", "18,-1,18", "18,18,-1"}
	var out []Record
	for i := 0; i < 3; i++ {
		out = append(out, Record{Name: "gpu", Type: "nvidia_h100_80gb_hbm3", Count: 1, File: fmt.Sprintf("/dev/nvidia%d", i),
			Cores: "0-1", Links: links[i], Flags: Flags{EnvNVML: true}})
	}
	return out
}

func loadWith(t *testing.T, conf, nodeGres string, det Detector) (*Node, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gres.conf")
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(context.Background(), Options{ConfPath: p, NodeName: "t1", CPUs: 2, Version: v2411,
		GresTypes: []string{"gpu"}, NodeGres: nodeGres, Detector: det, Exists: func(string) error { return nil }})
}

// TestLoad_AutoDetectMerge: configured GPUs take the detected records
// (type shortened to the configured one, env flags from AutoDetect, Cores
// and Links from the system); a detected GPU nobody configured is left out
// with a warning, under its own type (each configured type names one GPU).
func TestLoad_AutoDetectMerge(t *testing.T) {
	det := &fakeDetector{recs: h100s()}
	n, err := loadWith(t, "AutoDetect=nvml\nName=gpu Type=h100 File=/dev/nvidia[0-1]\n", "gpu:h100:2", det)
	if err != nil {
		t.Fatal(err)
	}
	if n.AutoDetect != AutoDetectNVML || det.req == nil || det.req.AutoDetect != AutoDetectNVML || det.req.CPUs != 2 {
		t.Fatalf("AutoDetect %q, request %+v", n.AutoDetect, det.req)
	}
	var got []string
	for _, r := range n.Records {
		got = append(got, LogLine(r, v2411))
	}
	want := []string{
		"Gres Name=gpu Type=h100 Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0-1 CoreCnt=2 Links=-1,18,18 Flags=HAS_FILE,HAS_TYPE,ENV_NVML",
		"Gres Name=gpu Type=h100 Count=1 Index=1 ID=7696487 File=/dev/nvidia1 Cores=0-1 CoreCnt=2 Links=18,-1,18 Flags=HAS_FILE,HAS_TYPE,ENV_NVML",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, r := range n.Records {
		if !r.Flags.Autodetected {
			t.Errorf("%s: not marked autodetected", r.File)
		}
	}
	if !hasMessage(n, "warning", "autodetected GPUs are being ignored: gpu:nvidia_h100_80gb_hbm3 File=/dev/nvidia2") {
		t.Errorf("no warning about nvidia2: %v", n.Messages)
	}
}

// TestLoad_AutoDetectNoLibrary: without the GPU library the node keeps the
// GPUs gres.conf names and says why; any other detector error stops Load.
func TestLoad_AutoDetectNoLibrary(t *testing.T) {
	conf := "AutoDetect=nvml\nName=gpu Type=h100 File=/dev/nvidia[0-1]\n"
	n, err := loadWith(t, conf, "gpu:h100:2", &fakeDetector{err: fmt.Errorf("nvml: %w", ErrNoLibrary)})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Records) != 1 || n.Records[0].File != "/dev/nvidia[0-1]" || n.Records[0].Count != 2 {
		t.Errorf("records %+v", n.Records)
	}
	if !hasMessage(n, "info", "found no library") {
		t.Errorf("no message about the missing library: %v", n.Messages)
	}
	boom := errors.New("nvml: device 3 fell off the bus")
	if _, err := loadWith(t, conf, "gpu:h100:2", &fakeDetector{err: boom}); !errors.Is(err, boom) {
		t.Errorf("detector error: %v", err)
	}
	// AutoDetect=off never asks.
	det := &fakeDetector{recs: h100s()}
	if _, err := loadWith(t, "AutoDetect=off\nName=gpu File=/dev/nvidia0\n", "gpu:1", det); err != nil || det.req != nil {
		t.Errorf("AutoDetect=off: %v, asked %v", err, det.req)
	}
}

func hasMessage(n *Node, level, sub string) bool {
	for _, m := range n.Messages {
		if m.Level == level && strings.Contains(m.Text, sub) {
			return true
		}
	}
	return false
}
