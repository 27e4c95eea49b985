package proc

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cred is a user identity: uid, primary gid and supplementary groups.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// DoAs runs fn on a dedicated OS thread whose filesystem identity is c
// (fsuid, fsgid and supplementary groups, set with raw per-thread system
// calls) and whose umask is umask (negative: inherited), so files fn
// creates belong to the user and every permission check is the user's,
// exactly as if the user opened them. A non-root fsuid also drops the
// thread's file capabilities (CAP_DAC_OVERRIDE, ...). The thread has its
// own fs attributes (unshare CLONE_FS) and is discarded when fn returns;
// no other thread of the process is affected. Safe for concurrent use.
func DoAs(c Cred, umask int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine exits locked, so the runtime
		// terminates the thread instead of reusing its credentials.
		runtime.LockOSThread()
		errc <- doAsLocked(c, umask, fn)
	}()
	return <-errc
}

func doAsLocked(c Cred, umask int, fn func() error) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("proc: unshare fs: %w", err)
	}
	if umask >= 0 {
		unix.Umask(umask)
	}
	groups := c.Groups
	if len(groups) == 0 {
		groups = []uint32{c.GID}
	}
	if _, _, e := unix.RawSyscall(sysSetgroups, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("proc: setgroups: %w", e)
	}
	unix.RawSyscall(sysSetfsgid, uintptr(c.GID), 0, 0)
	unix.RawSyscall(sysSetfsuid, uintptr(c.UID), 0, 0)
	// setfs[ug]id report nothing; asking with an invalid id returns the
	// current one without changing it.
	if g, _, _ := unix.RawSyscall(sysSetfsgid, ^uintptr(0), 0, 0); uint32(g) != c.GID {
		return fmt.Errorf("proc: setfsgid %d failed", c.GID)
	}
	if u, _, _ := unix.RawSyscall(sysSetfsuid, ^uintptr(0), 0, 0); uint32(u) != c.UID {
		return fmt.Errorf("proc: setfsuid %d failed", c.UID)
	}
	return fn()
}
