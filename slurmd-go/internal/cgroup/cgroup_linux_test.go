package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const hybridMountinfo = `24 30 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
25 24 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
26 24 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
27 24 0:25 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
28 24 0:26 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
29 24 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
30 24 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
`

const pureV2Mountinfo = `35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
36 24 0:31 / /mnt/with\040space rw - ext4 /dev/sda1 rw
`

func TestMounts_Parse(t *testing.T) {
	h := parseMountinfo([]byte(hybridMountinfo))
	if h.V2 != "/sys/fs/cgroup/unified" {
		t.Errorf("V2 = %q", h.V2)
	}
	want := map[string]string{"cpu": "/sys/fs/cgroup/cpu", "memory": "/sys/fs/cgroup/memory",
		"freezer": "/sys/fs/cgroup/freezer", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"}
	for k, v := range want {
		if h.V1[k] != v {
			t.Errorf("V1[%s] = %q, want %q", k, h.V1[k], v)
		}
	}
	if _, ok := h.V1["name=systemd"]; ok {
		t.Error("named hierarchy taken for a controller")
	}
	h = parseMountinfo([]byte(pureV2Mountinfo))
	if h.V2 != "/sys/fs/cgroup" || len(h.V1) != 0 {
		t.Errorf("pure v2: %+v", h)
	}
	if got := unescapeMount(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Errorf("unescape = %q", got)
	}
}

func TestSplitPath(t *testing.T) {
	for in, want := range map[string]string{"a/b/c": "a|b|c", "a": "a", ".": ""} {
		if got := strings.Join(splitPath(in), "|"); got != want {
			t.Errorf("splitPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("cgroup tests create cgroups: run them as root (make test and CI do)")
	}
}

// testRoot is a private directory under each hierarchy, removed afterwards.
func testRoot(t *testing.T) string {
	root := fmt.Sprintf("tiee-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	t.Cleanup(func() {
		h, _ := Mounts("")
		var mounts []string
		if h.V2 != "" {
			mounts = append(mounts, h.V2)
		}
		for _, m := range h.V1 {
			mounts = append(mounts, m)
		}
		for _, m := range mounts {
			base := filepath.Join(m, root)
			var dirs []string
			_ = filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				_ = syscall.Rmdir(dirs[i])
			}
		}
	})
	return root
}

// TestNew_ProbesThisHost checks the probe's choice against the rule on
// whatever this machine mounts.
func TestNew_ProbesThisHost(t *testing.T) {
	h, err := Mounts("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, v1mem := h.V1["memory"]
	_, v1frz := h.V1["freezer"]
	v2mem := false
	for _, c := range h.V2Controllers() {
		v2mem = v2mem || c == "memory"
	}
	want := KindNone
	switch {
	case h.V2 != "" && (v2mem || (!v1mem && !v1frz)):
		want = KindV2
	case v1mem || v1frz:
		want = KindV1
	}
	t.Logf("host: v2=%q controllers=%v v1=%v -> %s", h.V2, h.V2Controllers(), h.V1, m.Kind())
	if m.Kind() != want {
		t.Fatalf("New chose %s, want %s", m.Kind(), want)
	}
}

// managersHere returns every Manager this host can offer: v2 if a cgroup2
// hierarchy is mounted (even without controllers), v1 if any of its
// controllers is, None otherwise.
func managersHere(t *testing.T, root string) []Manager {
	h, err := Mounts("")
	if err != nil {
		t.Fatal(err)
	}
	var ms []Manager
	if h.V2 != "" {
		m, err := NewV2(h.V2, root)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if m, err := NewV1(h.V1, root); err == nil {
		ms = append(ms, m)
	} else if !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		ms = append(ms, None{})
	}
	return ms
}

// gated starts sh -c script blocked on reading a line, so it can be put in
// a cgroup before it forks.
func gated(t *testing.T, script string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read x; "+script)
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd, func() { _, _ = w.Write([]byte("go\n")); w.Close() }
}

func waitPIDs(t *testing.T, cg Cgroup, cond func(n int) bool) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := cg.PIDs()
		if err != nil {
			t.Fatal(err)
		}
		if cond(len(pids)) {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup %s holds %v", cg.Path(), pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestManager_Lifecycle(t *testing.T) {
	requireRoot(t)
	root := testRoot(t)
	for _, m := range managersHere(t, root) {
		t.Run(m.Kind(), func(t *testing.T) {
			cg, err := m.Create(4242, "batch")
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind() == KindNone {
				if _, err := cg.PIDs(); !errors.Is(err, ErrNotSupported) {
					t.Fatalf("None PIDs: %v", err)
				}
				return
			}
			if !strings.HasSuffix(cg.Path(), filepath.Join(root, "job_4242", "step_batch")) {
				t.Errorf("path %s", cg.Path())
			}
			// Create again opens the same cgroup.
			if cg2, err := m.Create(4242, "batch"); err != nil || cg2.Path() != cg.Path() {
				t.Fatalf("re-create: %v %v", cg2, err)
			}
			// A shell that ignores SIGTERM and forks two children after it
			// joined the cgroup: all three must be tracked and killed.
			cmd, goAhead := gated(t, "trap '' TERM; sleep 100 & sleep 100 & wait")
			if err := cg.AddPID(cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			goAhead()
			pids := waitPIDs(t, cg, func(n int) bool { return n >= 3 })
			if ok, err := cg.HasPID(cmd.Process.Pid); err != nil || !ok {
				t.Fatalf("HasPID(%d) = %v, %v (pids %v)", cmd.Process.Pid, ok, err, pids)
			}
			if ok, _ := cg.HasPID(os.Getpid()); ok {
				t.Fatal("test process reported in the step cgroup")
			}

			if err := cg.Freeze(); err != nil {
				t.Fatalf("freeze: %v", err)
			}
			if err := cg.Thaw(); err != nil {
				t.Fatalf("thaw: %v", err)
			}

			err = cg.SetMemoryLimit(64 << 20)
			switch {
			case err == nil:
				t.Logf("%s: memory limit set", m.Kind())
			case errors.Is(err, ErrNotSupported):
				t.Logf("%s: no memory controller here: %v", m.Kind(), err)
			default:
				t.Fatalf("SetMemoryLimit: %v", err)
			}

			if err := cg.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if ok, _ := cg.HasPID(cmd.Process.Pid); !ok {
				t.Fatal("the shell ignoring SIGTERM is gone after SIGTERM")
			}
			if err := cg.Kill(); err != nil {
				t.Fatalf("kill: %v", err)
			}
			waitPIDs(t, cg, func(n int) bool { return n == 0 })
			err = cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("shell ended with %v", err)
			}
			if err := cg.Remove(); err != nil {
				t.Fatal(err)
			}
			if exists(cg.Path()) || exists(filepath.Dir(cg.Path())) {
				t.Fatal("cgroup directories left behind")
			}
		})
	}
}

// TestManager_MemoryLimitEnforced runs a process that grows without bound
// under a 32 MiB job limit on every hierarchy here with a memory
// controller, and expects the kernel to OOM-kill it.
func TestManager_MemoryLimitEnforced(t *testing.T) {
	requireRoot(t)
	root := testRoot(t)
	tested := 0
	for _, m := range managersHere(t, root) {
		cg, err := m.Create(4343, "batch")
		if err != nil {
			t.Fatal(err)
		}
		if err := cg.SetMemoryLimit(32 << 20); err != nil {
			if !errors.Is(err, ErrNotSupported) {
				t.Fatal(err)
			}
			t.Logf("%s: %v", m.Kind(), err)
			_ = cg.Remove()
			continue
		}
		tested++
		t.Run(m.Kind(), func(t *testing.T) {
			// tail buffers a newline-free stream in memory.
			cmd, goAhead := gated(t, "head -c 1G /dev/zero | tail")
			if err := cg.AddPID(cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			goAhead()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("process over its memory limit was not killed")
			}
			// The kernel picks the OOM victim: tail (the shell exits 137) or,
			// at times, the shell itself (killed by SIGKILL).
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			tailKilled := ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGKILL)
			shellKilled := ws.Signaled() && ws.Signal() == syscall.SIGKILL
			if !tailKilled && !shellKilled {
				t.Fatalf("pipeline status %v, want it killed (tail's 137, or the shell by SIGKILL)", ws)
			}
			n, err := cg.OOMKills()
			if err != nil && !errors.Is(err, ErrNotSupported) {
				t.Fatal(err)
			}
			if err == nil && n == 0 {
				t.Fatal("no OOM kill counted")
			}
			waitPIDs(t, cg, func(n int) bool { return n == 0 })
			if err := cg.Remove(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("memory enforcement tested on %d hierarchies", tested)
}
