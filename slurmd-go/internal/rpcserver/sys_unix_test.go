//go:build unix

package rpcserver

import "syscall"

const syscallEADDRINUSE = syscall.EADDRINUSE
