package proc

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"
)

// TCPInode is the inode of the TCP socket with these two ends, from the
// kernel's socket table (sock_diag; stock reads /proc/net/tcp{,6}).
func TCPInode(local, remote *net.TCPAddr) (uint32, error) {
	s, err := netlink.SocketGet(local, remote)
	if err != nil {
		return 0, fmt.Errorf("proc: socket %v -> %v: %w", local, remote, err)
	}
	return s.INode, nil
}

// SocketOwner is the first process (in /proc order) holding a descriptor
// on socket inode, as callerid.c's find_pid_by_inode looks for it.
// Processes that end or refuse the read meanwhile are passed over.
func SocketOwner(inode uint32) (int, bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if t, err := os.Readlink(dir + fd.Name()); err == nil && t == want {
				return pid, true
			}
		}
	}
	return 0, false
}
