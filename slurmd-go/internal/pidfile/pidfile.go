// Package pidfile keeps one daemon per node the way slurmd does: the running
// daemon holds a write lock on its pid file; a new one SIGTERMs the holder and
// waits for the lock to be released before it takes over.
package pidfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockPoll is how often a new daemon re-checks the lock while the old one exits.
const LockPoll = 50 * time.Millisecond

// File is a held pid file. Close releases the lock; Remove unlinks first, as
// slurmd does on shutdown, so the file never names a dead daemon.
type File struct {
	path string
	f    *os.File
}

// Holder returns the pid of the process holding the lock on path, or 0.
func Holder(path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pidfile: open %s: %w", path, err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return 0, fmt.Errorf("pidfile: F_GETLK %s: %w", path, err)
	}
	if lk.Type == unix.F_UNLCK {
		return 0, nil
	}
	if lk.Pid > 0 {
		return int(lk.Pid), nil
	}
	b, _ := os.ReadFile(path)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, nil
}

// TakeOver stops a running daemon that holds path (SIGTERM, as slurmd's
// _kill_old_slurmd) and waits until its lock is gone or ctx ends.
// It returns the old pid (0 if none was running).
func TakeOver(ctx context.Context, path string) (int, error) {
	pid, err := Holder(path)
	if err != nil || pid == 0 {
		return 0, err
	}
	if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return pid, fmt.Errorf("pidfile: signal old daemon %d: %w", pid, err)
	}
	t := time.NewTicker(LockPoll)
	defer t.Stop()
	for {
		held, err := Holder(path)
		if err != nil {
			return pid, err
		}
		if held == 0 {
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return pid, fmt.Errorf("pidfile: old daemon %d still holds %s: %w", pid, path, ctx.Err())
		case <-t.C:
		}
	}
}

// Create writes our pid into path and holds a write lock on it.
func Create(path string) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("pidfile: dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pidfile: open %s: %w", path, err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		f.Close()
		return nil, fmt.Errorf("pidfile: lock %s (another daemon runs?): %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pidfile: truncate: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pidfile: write: %w", err)
	}
	return &File{path: path, f: f}, nil
}

// Remove unlinks the file and then releases the lock.
func (p *File) Remove() error {
	err := os.Remove(p.path)
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	return err
}
