package gres

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeStat answers /dev/nvidiaN as char 195:N and fails for anything else.
func fakeStat(path string) (DevType, uint32, uint32, error) {
	var n uint32
	if _, err := fmt.Sscanf(path, "/dev/nvidia%d", &n); err == nil {
		return DevChar, 195, n, nil
	}
	if strings.HasPrefix(path, "/dev/sd") {
		return DevBlock, 8, 0, nil
	}
	return 0, 0, 0, fmt.Errorf("gres: %s: %w", path, ErrNotDevice)
}

func TestDevices_Order(t *testing.T) {
	recs := []Record{
		{Name: "gpu", Type: "a100", File: "/dev/nvidia[2-3]"},
		{Name: "shard", File: "/dev/nvidia2"}, // another name: not counted
		{Name: "gpu", Type: "v100", File: "/dev/nvidia[0,1]"},
		{Name: "gpu", File: "/dev/sda", Flags: Flags{Multiple: false}},
	}
	devs, err := Devices(recs, "gpu", fakeStat)
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, DevNum: 2, Path: "/dev/nvidia2", Type: "a100", Dev: DevChar, Major: 195, Minor: 2},
		{Index: 1, DevNum: 3, Path: "/dev/nvidia3", Type: "a100", Dev: DevChar, Major: 195, Minor: 3},
		{Index: 2, DevNum: 0, Path: "/dev/nvidia0", Type: "v100", Dev: DevChar, Major: 195, Minor: 0},
		{Index: 3, DevNum: 1, Path: "/dev/nvidia1", Type: "v100", Dev: DevChar, Major: 195, Minor: 1},
		{Index: 4, DevNum: 4, Path: "/dev/sda", Dev: DevBlock, Major: 8}, // no trailing number: after the largest
	}
	if fmt.Sprint(devs) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", devs, want)
	}
}

func TestDevices_MultipleFilesOneIndex(t *testing.T) {
	recs := []Record{
		{Name: "gpu", File: "/dev/nvidia[0-1]", Flags: Flags{Multiple: true}},
		{Name: "gpu", File: "/dev/nvidia5"},
	}
	devs, err := Devices(recs, "gpu", fakeStat)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, d := range devs {
		got += fmt.Sprintf("%d:%s ", d.Index, d.Path)
	}
	if got != "0:/dev/nvidia0 0:/dev/nvidia1 1:/dev/nvidia5 " {
		t.Errorf("got %q", got)
	}
}

func TestDevices_Errors(t *testing.T) {
	recs := []Record{
		{Name: "gpu", File: "/dev/nvidia[0-1]"},
		{Name: "gpu", File: "/tmp/notadev"},
		{Name: "gpu", File: "/dev/nvidia1"},
		{Name: "gpu", File: "/dev/nvidia[3-"},
	}
	devs, err := Devices(recs, "gpu", fakeStat)
	if !errors.Is(err, ErrNotDevice) || !strings.Contains(err.Error(), "duplicate device file name (/dev/nvidia1)") ||
		!strings.Contains(err.Error(), "File=/dev/nvidia[3-") {
		t.Errorf("err = %v", err)
	}
	if len(devs) != 3 || devs[2].Index != 2 { // a file that fails gets no index (stock's continue)
		t.Errorf("devs = %v", devs)
	}
}

func TestStatDevice_DevNull(t *testing.T) {
	typ, maj, min, err := StatDevice("/dev/null")
	if err != nil || typ != DevChar || maj != 1 || min != 3 {
		t.Errorf("/dev/null: %v %d:%d %v", typ, maj, min, err)
	}
	if _, _, _, err := StatDevice("/"); !errors.Is(err, ErrNotDevice) {
		t.Errorf("/: %v", err)
	}
	if _, _, _, err := StatDevice("/nonexistent/x"); err == nil {
		t.Error("missing file: no error")
	}
}
