package fwddata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// WriteTimeout bounds connecting to the socket and writing the frame: the
// reader is a step manager on this node, which reads as soon as it accepts.
const WriteTimeout = 10 * time.Second

// SunPathMax is sizeof(sockaddr_un.sun_path) on Linux.
const SunPathMax = 108

// Expand substitutes the receiving node's name for the first %h and %n of
// address, as slurmd does with slurm_conf_expand_slurmd_path(address,
// node_name, node_name).
func Expand(address, nodeName string) string {
	return slurmconf.ExpandPath(address, nodeName, nodeName)
}

// Deliver connects to the unix socket path with the file-system identity
// uid/gid, then writes htonl(uid), htonl(len(data)) and data. rc is what
// stock answers: the connect's errno (EINVAL for a path too long), and 0
// once connected even when the write then fails (its rwfail keeps rc);
// err says what went wrong either way.
func Deliver(path string, uid, gid uint32, data []byte) (rc uint32, err error) {
	if len(path) >= SunPathMax {
		return uint32(syscall.EINVAL), fmt.Errorf("fwddata: Unix socket path '%s' is too long. (%d > %d)", path, len(path)+1, SunPathMax)
	}
	var conn net.Conn
	err = proc.DoAs(proc.Cred{UID: uid, GID: gid}, -1, func() error {
		c, err := net.DialTimeout("unix", path, WriteTimeout)
		conn = c
		return err
	})
	if err != nil {
		rc = uint32(syscall.ECONNREFUSED)
		var en syscall.Errno
		if errors.As(err, &en) {
			rc = uint32(en)
		}
		return rc, fmt.Errorf("fwddata: failed connecting to specified socket '%s': %w", path, err)
	}
	defer conn.Close()
	_ = conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	frame := make([]byte, 8, 8+len(data))
	binary.BigEndian.PutUint32(frame[0:], uid)
	binary.BigEndian.PutUint32(frame[4:], uint32(len(data)))
	if _, err := conn.Write(append(frame, data...)); err != nil {
		return 0, fmt.Errorf("fwddata: write to '%s': %w", path, err)
	}
	return 0, nil
}
