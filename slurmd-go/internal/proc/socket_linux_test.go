package proc

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// The owner of a TCP connection's socket is found from its inode.
func TestSocketOwner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	ino, err := TCPInode(c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr))
	if err != nil || ino != uint32(st.Ino) {
		t.Fatalf("TCPInode = %d, %v; want %d", ino, err, st.Ino)
	}
	if pid, ok := SocketOwner(uint32(st.Ino)); !ok || pid != os.Getpid() {
		t.Fatalf("SocketOwner(%d) = %d, %v; want %d", st.Ino, pid, ok, os.Getpid())
	}
	if _, ok := SocketOwner(0); ok {
		t.Fatal("inode 0 has an owner")
	}
}
