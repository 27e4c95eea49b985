package cgroup

import (
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runDeviceProgram interprets the instructions DeviceProgram emits (the
// kernel's semantics for them) on one access, so the program's logic is
// checked without a cgroup2 kernel.
func runDeviceProgram(t *testing.T, prog []byte, block bool, major, minor uint32) int64 {
	t.Helper()
	typ := uint64(bpfDevcgDevChar)
	if block {
		typ = bpfDevcgDevBlock
	}
	// access_type: BPF_DEVCG_ACC_READ|WRITE (1|2) << 16 | type
	ctx := [3]uint64{3<<16 | typ, uint64(major), uint64(minor)}
	var r [11]uint64
	for pc := 0; pc*8 < len(prog); pc++ {
		in := prog[pc*8 : pc*8+8]
		code, dst, src := in[0], in[1]&0xf, in[1]>>4
		off := int16(binary.LittleEndian.Uint16(in[2:]))
		imm := int32(binary.LittleEndian.Uint32(in[4:]))
		switch code {
		case insnLdxMemW:
			if src != 1 || off%4 != 0 || off < 0 || off > 8 {
				t.Fatalf("pc %d: load from r%d%+d", pc, src, off)
			}
			r[dst] = ctx[off/4]
		case insnAndK32:
			r[dst] = uint64(uint32(r[dst]) & uint32(imm))
		case insnJneK:
			if r[dst] != uint64(int64(imm)) {
				pc += int(off)
			}
		case insnMov64K:
			r[dst] = uint64(int64(imm))
		case insnExit:
			return int64(r[0])
		default:
			t.Fatalf("pc %d: opcode 0x%02x", pc, code)
		}
	}
	t.Fatal("program ran off its end")
	return -1
}

func TestDeviceProgram_DeniesOnlyItsDevices(t *testing.T) {
	rules := []DeviceRule{
		{Major: 195, Minor: 0, Allow: true},
		{Major: 195, Minor: 1},
		{Major: 195, Minor: 255},
		{Block: true, Major: 8, Minor: 16},
	}
	prog := DeviceProgram(rules)
	if len(prog) != (4+3*5+2)*8 {
		t.Fatalf("program of %d bytes", len(prog))
	}
	cases := []struct {
		block        bool
		major, minor uint32
		want         int64
	}{
		{false, 195, 0, 1},   // allowed GPU
		{false, 195, 1, 0},   // denied GPU
		{false, 195, 255, 0}, // nvidiactl-like entry denied when listed
		{false, 195, 2, 1},   // not a rule: allowed
		{true, 195, 1, 1},    // same numbers, other type
		{true, 8, 16, 0},
		{false, 8, 16, 1},
		{false, 1, 3, 1}, // /dev/null
	}
	for _, c := range cases {
		if got := runDeviceProgram(t, prog, c.block, c.major, c.minor); got != c.want {
			t.Errorf("block=%v %d:%d -> %d, want %d", c.block, c.major, c.minor, got, c.want)
		}
	}
	if got := runDeviceProgram(t, DeviceProgram(nil), false, 195, 0); got != 1 {
		t.Errorf("empty program denies")
	}
}

func TestDeviceRule_String(t *testing.T) {
	if s := (DeviceRule{Major: 195, Minor: 3}).String(); s != "c 195:3 rwm" {
		t.Errorf("%q", s)
	}
	if s := (DeviceRule{Block: true, Major: 8, Minor: 0}).String(); s != "b 8:0 rwm" {
		t.Errorf("%q", s)
	}
}

// TestDevicesV1_Confines runs a real process in a v1 devices cgroup of this
// host: the job level denies /dev/full's numbers (1:7), the task level
// also /dev/zero's (1:5); /dev/null stays open to it.
func TestDevicesV1_Confines(t *testing.T) {
	requireRoot(t)
	h, err := Mounts("")
	if err != nil {
		t.Fatal(err)
	}
	mnt, ok := h.V1["devices"]
	if !ok {
		t.Fatalf("this host mounts no v1 devices controller (mounts: v2=%q v1=%v)", h.V2, h.V1)
	}
	root := testRoot(t)
	m, err := NewDevicesV1(mnt, root)
	if err != nil {
		t.Fatal(err)
	}
	full := DeviceRule{Major: 1, Minor: 7}
	zero := DeviceRule{Major: 1, Minor: 5}
	dc, err := m.Confine(77, "0", []DeviceRule{full}, []DeviceRule{{Major: 1, Minor: 5, Allow: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := confinedOpens(t, dc, []DeviceRule{zero}), "/dev/null ok\n/dev/full denied\n/dev/zero denied\n"; got != want {
		t.Errorf("confined opens:\n%s\nwant:\n%s", got, want)
	}
	if err := dc.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(mnt, root, "job_77")) {
		t.Error("job level left behind")
	}
}

// confinedOpens runs a shell as task 0 of dc (with taskRules) and returns
// which of /dev/null, /dev/full and /dev/zero it could open.
func confinedOpens(t *testing.T, dc DeviceCgroup, taskRules []DeviceRule) string {
	t.Helper()
	script := `for f in /dev/null /dev/full /dev/zero; do if true < $f 2>/dev/null; then echo $f ok; else echo $f denied; fi; done`
	cmd := exec.Command("/bin/sh", "-c", "read x; "+script)
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := dc.AddTask(0, cmd.Process.Pid, taskRules); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	// The shell opens nothing before it reads: it is in its task level now.
	_, _ = w.Write([]byte("go\n"))
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(confinedShellTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("confined shell did not finish in %v", confinedShellTimeout)
	}
	return out.String()
}

// confinedShellTimeout bounds confinedOpens' shell.
const confinedShellTimeout = 10 * time.Second

// TestDevicesV2_Confines runs a real process under the BPF device programs
// of a cgroup2 hierarchy mounted for the test (this works on a v1 host
// too: device programs need no controller): the job level denies
// /dev/full (1:7), the task level also /dev/zero (1:5); /dev/null stays
// open. Every level must allow an access (BPF_F_ALLOW_MULTI).
func TestDevicesV2_Confines(t *testing.T) {
	requireRoot(t)
	mnt := t.TempDir()
	if err := unix.Mount("none", mnt, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mount cgroup2 on %s: %v", mnt, err)
	}
	const root = "tiee-test-v2"
	t.Cleanup(func() {
		// Deepest first: a cgroup2 directory goes with rmdir only.
		for _, d := range []string{"job_78/step_0/task_0", "job_78/step_0", "job_78", ""} {
			_ = rmdirRetry(filepath.Join(mnt, root, d))
		}
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	m, err := NewDevicesV2(mnt, root)
	if err != nil {
		t.Fatal(err)
	}
	full := DeviceRule{Major: 1, Minor: 7}
	zero := DeviceRule{Major: 1, Minor: 5}
	dc, err := m.Confine(78, "0", []DeviceRule{full}, []DeviceRule{{Major: 1, Minor: 5, Allow: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := confinedOpens(t, dc, []DeviceRule{zero}), "/dev/null ok\n/dev/full denied\n/dev/zero denied\n"; got != want {
		t.Errorf("confined opens:\n%s\nwant:\n%s", got, want)
	}
	if err := dc.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(mnt, root, "job_78", "step_0", "task_0")) {
		t.Error("task level left behind")
	}
}
