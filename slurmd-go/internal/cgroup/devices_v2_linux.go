package cgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DevicesV2 confines devices on the unified hierarchy as stock's cgroup/v2
// plugin does: a BPF_PROG_TYPE_CGROUP_DEVICE program attached to each
// level (job, step, task; BPF_F_ALLOW_MULTI, so an access must pass every
// program on the way up). A program denies its rules' devices and lets
// everything else through.
type DevicesV2 struct {
	mount string
	root  string
}

var (
	_ DeviceManager = (*DevicesV2)(nil)
	_ DeviceCgroup  = (*devicesV2Cgroup)(nil)
)

// NewDevicesV2 returns the device manager of the cgroup2 mount.
func NewDevicesV2(mount, root string) (*DevicesV2, error) {
	if !exists(filepath.Join(mount, "cgroup.controllers")) {
		return nil, fmt.Errorf("cgroup: %s is not a cgroup2 mount", mount)
	}
	return &DevicesV2{mount: mount, root: filepath.Clean(root)}, nil
}

// Kind implements DeviceManager.
func (*DevicesV2) Kind() string { return KindV2 }

// Confine implements DeviceManager.
func (m *DevicesV2) Confine(job uint32, step string, jobRules, stepRules []DeviceRule) (DeviceCgroup, error) {
	jobDir := filepath.Join(m.mount, m.root, jobDirName(job))
	stepDir := filepath.Join(jobDir, stepDirName(step))
	if err := mkdirAll(m.mount, stepDir, false); err != nil {
		return nil, err
	}
	if err := attachDeviceProgram(jobDir, jobRules); err != nil {
		return nil, err
	}
	if err := attachDeviceProgram(stepDir, stepRules); err != nil {
		return nil, err
	}
	return &devicesV2Cgroup{job: jobDir, step: stepDir, stepRules: stepRules}, nil
}

type devicesV2Cgroup struct {
	job, step string
	stepRules []DeviceRule
	mu        sync.Mutex
	tasks     []string // guarded by mu
}

// AddTask implements DeviceCgroup: the task moves from the step level (the
// proctrack cgroup) into task_<n> below it, which the step's kill, freeze
// and pid listing still cover.
func (c *devicesV2Cgroup) AddTask(task int, pid int, rules []DeviceRule) error {
	if rules == nil {
		rules = c.stepRules
	}
	dir := filepath.Join(c.step, "task_"+strconv.Itoa(task))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	c.mu.Lock()
	c.tasks = append(c.tasks, dir)
	c.mu.Unlock()
	if err := attachDeviceProgram(dir, rules); err != nil {
		return err
	}
	return writeFile(dir, "cgroup.procs", strconv.Itoa(pid))
}

// Remove implements DeviceCgroup: the task levels only (the step and job
// levels are the proctrack cgroup's, removed with it).
func (c *devicesV2Cgroup) Remove() error {
	c.mu.Lock()
	tasks := c.tasks
	c.tasks = nil
	c.mu.Unlock()
	var errs []error
	for _, d := range tasks {
		if err := rmdirRetry(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// BPF constants of linux/bpf.h the program uses.
const (
	bpfDevcgDevBlock = 1
	bpfDevcgDevChar  = 2

	insnLdxMemW  = 0x61 // BPF_LDX | BPF_MEM | BPF_W
	insnAndK32   = 0x54 // BPF_ALU | BPF_AND | BPF_K
	insnJneK     = 0x55 // BPF_JMP | BPF_JNE | BPF_K
	insnMov64K   = 0xb7 // BPF_ALU64 | BPF_MOV | BPF_K
	insnExit     = 0x95 // BPF_JMP | BPF_EXIT
	bpfInsnBytes = 8
)

type bpfInsn struct {
	code     uint8
	dst, src uint8
	off      int16
	imm      int32
}

func (i bpfInsn) append(b []byte) []byte {
	b = append(b, i.code, i.dst&0xf|i.src<<4)
	b = binary.LittleEndian.AppendUint16(b, uint16(i.off))
	return binary.LittleEndian.AppendUint32(b, uint32(i.imm))
}

// DeviceProgram is the cgroup device program for rules: for each denied
// device, "type, major and minor match → 0 (deny)"; then 1 (allow). The
// context (struct bpf_cgroup_dev_ctx) is u32 access_type (device type in
// its low 16 bits), u32 major, u32 minor. Encoded little-endian (x86-64,
// arm64), 8 bytes an instruction.
func DeviceProgram(rules []DeviceRule) []byte {
	insns := []bpfInsn{
		{code: insnLdxMemW, dst: 2, src: 1, off: 0}, // r2 = access_type
		{code: insnAndK32, dst: 2, imm: 0xffff},     // w2 &= 0xffff: the type
		{code: insnLdxMemW, dst: 3, src: 1, off: 4}, // r3 = major
		{code: insnLdxMemW, dst: 4, src: 1, off: 8}, // r4 = minor
	}
	for _, r := range rules {
		if r.Allow {
			continue // allowed by the default below
		}
		t := int32(bpfDevcgDevChar)
		if r.Block {
			t = bpfDevcgDevBlock
		}
		insns = append(insns,
			bpfInsn{code: insnJneK, dst: 2, off: 4, imm: t},
			bpfInsn{code: insnJneK, dst: 3, off: 3, imm: int32(r.Major)},
			bpfInsn{code: insnJneK, dst: 4, off: 2, imm: int32(r.Minor)},
			bpfInsn{code: insnMov64K, dst: 0, imm: 0},
			bpfInsn{code: insnExit},
		)
	}
	insns = append(insns, bpfInsn{code: insnMov64K, dst: 0, imm: 1}, bpfInsn{code: insnExit})
	out := make([]byte, 0, len(insns)*bpfInsnBytes)
	for _, i := range insns {
		out = i.append(out)
	}
	return out
}

// attachDeviceProgram loads DeviceProgram(rules) and attaches it to the
// cgroup at dir (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI). The attachment
// holds the program; it goes with the cgroup.
func attachDeviceProgram(dir string, rules []DeviceRule) error {
	prog := DeviceProgram(rules)
	license := []byte("GPL\x00")
	logBuf := make([]byte, 4096)
	// union bpf_attr for BPF_PROG_LOAD, up to log_buf.
	var load struct {
		progType, insnCnt uint32
		insns, license    uint64
		logLevel, logSize uint32
		logBuf            uint64
	}
	load.progType = unix.BPF_PROG_TYPE_CGROUP_DEVICE
	load.insnCnt = uint32(len(prog) / bpfInsnBytes)
	load.insns = uint64(uintptr(unsafe.Pointer(&prog[0])))
	load.license = uint64(uintptr(unsafe.Pointer(&license[0])))
	load.logLevel, load.logSize = 1, uint32(len(logBuf))
	load.logBuf = uint64(uintptr(unsafe.Pointer(&logBuf[0])))
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&load)), unsafe.Sizeof(load))
	// The attr holds the buffers as plain addresses.
	runtime.KeepAlive(prog)
	runtime.KeepAlive(license)
	runtime.KeepAlive(logBuf)
	if errno != 0 {
		return fmt.Errorf("cgroup: load device program for %s: %w (verifier: %s)", dir, errno, cString(logBuf))
	}
	progFD := int(fd)
	defer unix.Close(progFD)
	cg, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cgroup: open %s: %w", dir, err)
	}
	defer unix.Close(cg)
	attach := struct {
		targetFD, attachFD, attachType, attachFlags uint32
	}{uint32(cg), uint32(progFD), unix.BPF_CGROUP_DEVICE, unix.BPF_F_ALLOW_MULTI}
	if _, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_ATTACH, uintptr(unsafe.Pointer(&attach)), unsafe.Sizeof(attach)); errno != 0 {
		return fmt.Errorf("cgroup: attach device program to %s: %w", dir, errno)
	}
	return nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
