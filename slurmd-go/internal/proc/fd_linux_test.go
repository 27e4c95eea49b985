package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// leak makes a descriptor without close-on-exec, as one inherited or made
// by a raw syscall is.
func leak(t *testing.T) int {
	t.Helper()
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func cloexec(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatalf("fd %d: %v", fd, err)
	}
	return flags&unix.FD_CLOEXEC != 0
}

// childFDs lists the descriptors a child started with os/exec holds.
func childFDs(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("/bin/ls", "/proc/self/fd").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

func TestCloseOnExecFrom_ChildGetsStdioOnly(t *testing.T) {
	fd := leak(t)
	if got := childFDs(t); !contains(got, strconv.Itoa(fd)) {
		t.Fatalf("the leaked fd %d should reach a child before the fix: %v", fd, got)
	}
	if err := CloseOnExecFrom(3); err != nil {
		t.Fatal(err)
	}
	if !cloexec(t, fd) {
		t.Fatalf("fd %d is still inherited by children", fd)
	}
	// ls's own directory descriptor is the only one past stdio.
	if got := childFDs(t); len(got) != 4 {
		t.Fatalf("a child holds %v, want 0 1 2 and ls's own", got)
	}
}

func TestCloseInherited_KeepsCloseOnExec(t *testing.T) {
	fd := leak(t)
	own, err := os.Open("/dev/null") // close-on-exec, as the runtime's are
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := CloseInherited(3); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Fatalf("inherited fd %d still open (%v)", fd, err)
	}
	if !cloexec(t, int(own.Fd())) {
		t.Fatal("a close-on-exec descriptor lost its flag")
	}
	if _, err := own.Stat(); err != nil {
		t.Fatalf("a close-on-exec descriptor was closed: %v", err)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
