//go:build unix

package rpcserver

import (
	"fmt"
	"net"
	"syscall"
)

// sockname returns the local address of a socket descriptor.
func sockname(fd int) (net.Addr, error) {
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("rpcserver: getsockname: %w", err)
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}, nil
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return nil, fmt.Errorf("rpcserver: getsockname: unexpected %T", sa)
}

func closeFD(fd int) { _ = syscall.Close(fd) }

// nofileLimit returns the soft RLIMIT_NOFILE.
func nofileLimit() (int, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0, false
	}
	return int(rl.Cur), true
}
