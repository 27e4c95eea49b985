//go:build linux && (386 || arm)

package proc

import "golang.org/x/sys/unix"

// 32-bit id system calls (the plain ones take 16-bit ids on these arches).
const (
	sysSetgroups = unix.SYS_SETGROUPS32
	sysSetfsuid  = unix.SYS_SETFSUID32
	sysSetfsgid  = unix.SYS_SETFSGID32
)
