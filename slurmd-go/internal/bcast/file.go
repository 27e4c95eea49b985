package bcast

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func (t *transfer) cred() proc.Cred { return proc.Cred{UID: t.uid, GID: t.gid, Groups: t.gids} }

// openAs opens path for writing with the user's identity: created 0700,
// refused if it exists unless force truncates it (_open_as_other).
func openAs(c proc.Cred, path string, force bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | unix.O_CLOEXEC
	if force {
		flags |= os.O_TRUNC
	} else {
		flags |= os.O_EXCL
	}
	var f *os.File
	err := proc.DoAs(c, -1, func() error {
		var err error
		f, err = os.OpenFile(path, flags, 0o700)
		return err
	})
	return f, err
}

// mkdirAs makes the 0700 library directory of --send-libs as the user;
// with replace (24.11's _open_as_other, make_dir with force) a directory
// already there is deleted first, with everything in it and without
// following symbolic links (nftw FTW_PHYS), so no stale library survives.
func mkdirAs(c proc.Cred, dir string, replace bool) error {
	return proc.DoAs(c, -1, func() error {
		if replace {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("can't delete dir %s: %w", dir, err)
			}
		}
		return unix.Mkdir(dir, 0o700)
	})
}

// write appends data (stock writes each block where the last ended) and, on
// the last block, sets the mode's permission bits, the owner and, when the
// block carries them (--preserve), the access and modification times, then
// closes the file. The metadata calls work on the descriptor and run with
// the user's identity: a file the user may not chown stays as it is, with
// a log line, where stock (as root) would hand it over.
func (t *transfer) write(data []byte, last bool, m *slurmproto.FileBcast, log hclog.Logger) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return fmt.Errorf("bcast: transfer of %s was dropped", t.fname)
	}
	if _, err := t.f.Write(data); err != nil {
		if last {
			// No block follows to finish the file: close it now rather
			// than at the stall sweep.
			t.f.Close()
			t.f = nil
		}
		return err
	}
	if !last {
		return nil
	}
	fd := int(t.f.Fd())
	err := proc.DoAs(t.cred(), -1, func() error {
		if err := unix.Fchmod(fd, uint32(m.Modes)&0o777); err != nil {
			log.Error("sbcast: can't chmod", "fname", t.fname, "error", err)
		}
		if err := unix.Fchown(fd, int(t.uid), int(t.gid)); err != nil {
			log.Error("sbcast: can't chown", "fname", t.fname, "uid", t.uid, "gid", t.gid, "error", err)
		}
		if !m.ATime.IsZero() && m.ATime.Unix() != 0 {
			if err := futimens(fd, m.ATime, m.MTime); err != nil {
				log.Error("sbcast: can't futimens", "fname", t.fname, "error", err)
			}
		}
		return nil
	})
	cerr := t.f.Close()
	t.f = nil
	return errors.Join(err, cerr)
}

// futimens sets whole-second times on fd (utimensat with a NULL path, as
// glibc's futimens).
func futimens(fd int, atime, mtime time.Time) error {
	ts := [2]unix.Timespec{{Sec: atime.Unix()}, {Sec: mtime.Unix()}}
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// close drops an unfinished transfer's descriptor.
func (t *transfer) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}
