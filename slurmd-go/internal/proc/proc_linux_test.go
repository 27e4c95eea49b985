package proc

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	s, err := parseStat(42, []byte("42 (we ird) (name)) S 1 40 39 0 -1 4194560 ..."))
	if err != nil || s != (Stat{PID: 42, PPID: 1, PGID: 40, SID: 39, State: 'S'}) {
		t.Fatalf("parseStat = %+v, %v", s, err)
	}
	if _, err := parseStat(1, []byte("1 (x")); err == nil {
		t.Error("malformed stat accepted")
	}
	self, err := ReadStat(os.Getpid())
	if err != nil || self.PPID != os.Getppid() {
		t.Errorf("ReadStat(self) = %+v, %v", self, err)
	}
}

func TestParsePropagate(t *testing.T) {
	all := func(m map[string]bool, v bool) bool {
		for _, r := range RlimitTable {
			if m[r.Name] != v {
				return false
			}
		}
		return len(m) == len(RlimitTable)
	}
	m, err := ParsePropagate("", "")
	if err != nil || !all(m, true) {
		t.Errorf("default = %v %v", m, err)
	}
	if m, _ := ParsePropagate("NONE", ""); !all(m, false) {
		t.Errorf("NONE = %v", m)
	}
	m, _ = ParsePropagate("CORE,RLIMIT_NOFILE", "")
	if !m["CORE"] || !m["NOFILE"] || m["CPU"] || m["AS"] {
		t.Errorf("CORE,NOFILE = %v", m)
	}
	m, _ = ParsePropagate("ALL", "MEMLOCK STACK")
	if m["MEMLOCK"] || m["STACK"] || !m["CPU"] {
		t.Errorf("except = %v", m)
	}
	if m, _ := ParsePropagate("", "NONE"); !all(m, true) {
		t.Errorf("except NONE = %v", m)
	}
	if _, err := ParsePropagate("BOGUS", ""); err == nil {
		t.Error("bad name accepted")
	}
}

func TestTreeAndSignal(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sid := cmd.Process.Pid
	var pids []int
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		pids, err = Tree(0, sid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) != 3 {
		t.Fatalf("session %d holds %v", sid, pids)
	}
	byRoot, _ := Tree(sid, 0, 0)
	if len(byRoot) != 3 {
		t.Errorf("descendants of %d: %v", sid, byRoot)
	}
	if err := KillPG(sid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := KillPG(1, syscall.SIGTERM); err == nil {
		t.Error("KillPG(1) allowed")
	}
	if err := Signal([]int{os.Getpid(), 999999999}, syscall.SIGKILL); err != nil {
		t.Errorf("Signal skipping self and a missing pid: %v", err)
	}
}

func TestReaper(t *testing.T) {
	r := NewReaper()
	defer r.Stop()
	ch, err := r.Start(exec.Command("/bin/sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ch:
		if e.Status.ExitStatus() != 3 || uint32(e.Status) != 0x300 {
			t.Errorf("status %#x", uint32(e.Status))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit")
	}
}

// TestSetOOMScoreAdj raises a child's score (lowering it needs
// CAP_SYS_RESOURCE, which not every root has, e.g. in this VM).
func TestSetOOMScoreAdj(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := SetOOMScoreAdj(cmd.Process.Pid, 500); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/oom_score_adj")
	if string(b) != "500\n" {
		t.Errorf("oom_score_adj %q", b)
	}
}

// TestDoAs: files made in DoAs belong to the user, the user's permissions
// apply, the umask is the given one, and the rest of the process keeps
// root's identity.
func TestDoAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("changing the file system identity needs root: run as root (make test and CI do)")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("user nobody (Debian base-passwd) is missing: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c := Cred{UID: uint32(uid), GID: uint32(gid), Groups: []uint32{uint32(gid)}}
	dir := t.TempDir()
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	rootOnly := filepath.Join(dir, "root")
	open := filepath.Join(dir, "open")
	_ = os.Mkdir(rootOnly, 0o755)
	_ = os.Mkdir(open, 0o777)
	_ = os.Chmod(open, 0o777)
	err = DoAs(c, 0o027, func() error {
		if f, err := os.Create(filepath.Join(rootOnly, "x")); err == nil {
			f.Close()
			return errors.New("created a file in root's 0755 directory")
		}
		f, err := os.OpenFile(filepath.Join(open, "y"), os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(open, "y"), &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Uid) != uid || int(st.Gid) != gid || st.Mode&0o777 != 0o640 {
		t.Errorf("file %d:%d %o, want %d:%d 640", st.Uid, st.Gid, st.Mode&0o777, uid, gid)
	}
	// This thread and process are still root.
	f, err := os.Create(filepath.Join(rootOnly, "z"))
	if err != nil {
		t.Fatalf("root lost its rights: %v", err)
	}
	f.Close()
	if err := syscall.Stat(filepath.Join(rootOnly, "z"), &st); err != nil || st.Uid != 0 {
		t.Errorf("root's file owned by %d", st.Uid)
	}
}
