//go:build linux && !386 && !arm

package proc

import "golang.org/x/sys/unix"

// 32-bit id system calls (the plain ones are 32-bit on these arches).
const (
	sysSetgroups = unix.SYS_SETGROUPS
	sysSetfsuid  = unix.SYS_SETFSUID
	sysSetfsgid  = unix.SYS_SETFSGID
)
