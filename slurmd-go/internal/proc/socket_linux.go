package proc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TCPInode is the inode of the TCP socket with these two ends, from the
// kernel's socket table (a sock_diag dump of local's family; stock reads
// /proc/net/tcp{,6}). The four fields must all match: the kernel filters
// a dump by port only. Sockets without an inode (TIME_WAIT) do not count.
func TCPInode(local, remote *net.TCPAddr) (uint32, error) {
	family := uint8(unix.AF_INET6)
	if local.IP.To4() != nil {
		family = unix.AF_INET
	}
	socks, err := netlink.SocketDiagTCP(family)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return 0, fmt.Errorf("proc: TCP socket table: %w", err)
	}
	for _, s := range socks {
		id := s.ID
		if s.INode != 0 && int(id.SourcePort) == local.Port && int(id.DestinationPort) == remote.Port &&
			id.Source.Equal(local.IP) && id.Destination.Equal(remote.IP) {
			return s.INode, nil
		}
	}
	return 0, fmt.Errorf("proc: no TCP socket %v -> %v", local, remote)
}

// SocketOwner is the first process (in /proc order) holding a descriptor
// on socket inode, as callerid.c's find_pid_by_inode looks for it.
// Processes that end or refuse the read meanwhile are passed over.
func SocketOwner(inode uint32) (int, bool) {
	pids, err := PIDs()
	if err != nil {
		return 0, false
	}
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
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
