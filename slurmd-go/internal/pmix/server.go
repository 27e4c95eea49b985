package pmix

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// DefaultTimeout is SLURM_PMIX_TIMEOUT's default (pmixp_common.h): the
	// bound on one fence or direct modex.
	DefaultTimeout = 300 * time.Second
	// inboundReadTimeout bounds reading one forwarded message from slurmd.
	inboundReadTimeout = 30 * time.Second
	// dirMode is what stock's directories end with, measured on 22.05.8 with
	// libpmix 4.2.2: pmixp_mkdir asks 0770, but both directories are 0700
	// (owned by the user) once its server runs.
	dirMode = 0o700
)

// Config describes one step's PMIx server on this node.
type Config struct {
	Job Job
	// HelperPath is the slurmd-go-pmix binary.
	HelperPath string
	// Groups are the user's supplementary groups (the helper runs as the user).
	Groups []uint32
	// HelperEnv is the helper's environment (PMIX_SERVER_TMPDIR is added).
	HelperEnv []string
	// SpoolDir is this node's SlurmdSpoolDir, expanded: the listener's directory.
	SpoolDir string
	// RemoteAddress is the listener's path as other nodes' slurmd expand it
	// (the SlurmdSpoolDir pattern joined with SocketName).
	RemoteAddress string
	Sender        Sender
	// Timeout bounds a fence or a direct modex (DefaultTimeout if zero).
	Timeout time.Duration
	// OnFatal is told, once, that the step cannot go on (a fence that cannot
	// complete, a broken helper, PMIx_Abort). Called from any goroutine.
	OnFatal func(error)
	// OnAbort is a rank's PMIx_Abort; nil makes it fatal. Any goroutine.
	OnAbort func(status int32, rank uint32, msg string)
	Log     hclog.Logger
}

// Server is one step's PMIx server on this node.
type Server struct {
	cfg   Config
	log   hclog.Logger
	h     *helper
	ex    *exchange
	ln    *net.UnixListener
	envs  map[uint32][]string
	once  sync.Once // guards the OnFatal call
	wg    sync.WaitGroup
	sock  string
	dirs  []string
	close sync.Once
}

// Start creates the step's directories and listener, starts the helper and
// waits until it has every local task's environment. On error nothing is
// left behind.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Job.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	j := &cfg.Job
	s := &Server{cfg: cfg, log: cfg.Log.Named("pmix").With("step_id", fmt.Sprintf("%d.%d", j.JobID, j.StepID))}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.mkdir(j.LibTmpDir, true); err != nil {
		return nil, fmt.Errorf("pmix: cannot create server lib tmpdir: %w", err)
	}
	if err := s.mkdir(j.CliTmpDir, false); err != nil {
		return nil, fmt.Errorf("pmix: cannot create client cli tmpdir: %w", err)
	}
	s.sock = filepath.Join(cfg.SpoolDir, SocketName(j.JobID, j.StepID))
	os.Remove(s.sock) // a crashed step's; the step id is this one's
	s.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: s.sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("pmix: listen: %w", err)
	}
	cred := &syscall.Credential{Uid: j.UID, Gid: j.GID, Groups: cfg.Groups}
	env := append(append([]string{}, cfg.HelperEnv...), "PMIX_SERVER_TMPDIR="+j.LibTmpDir)
	if s.h, err = startHelper(cfg.HelperPath, cred, env, s.log.Named("helper")); err != nil {
		return nil, err
	}
	if s.envs, err = s.h.setup(ctx, j); err != nil {
		return nil, err
	}
	s.ex = newExchange(j, s.h, newRetrySender(cfg.Sender, s.log), cfg.RemoteAddress, cfg.Timeout, s.fail, s.log)
	s.ex.onAbort = cfg.OnAbort
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.h.serve(s.ex); err != nil {
			s.fail(err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.accept()
	}()
	s.log.Debug("server ready", "nspace", j.Namespace(), "local_ranks", len(j.LocalRanks()))
	return s, nil
}

// mkdir makes dir as stock leaves it: dirMode whatever the umask, owned by
// the job's user. A stale dir of the server's (a crashed step of the
// same id) is replaced.
func (s *Server) mkdir(dir string, replace bool) error {
	if replace {
		if _, err := os.Lstat(dir); err == nil {
			s.log.Warn("removing a stale directory", "path", dir)
			os.RemoveAll(dir)
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil {
		return err
	}
	s.dirs = append(s.dirs, dir)
	if err := os.Chmod(dir, dirMode); err != nil {
		return err
	}
	return os.Chown(dir, int(s.cfg.Job.UID), -1)
}

// TaskEnv is the environment the helper made for rank (PMIx_server_setup_fork),
// "NAME=value" entries to overwrite into the task's environment.
func (s *Server) TaskEnv(rank uint32) []string { return s.envs[rank] }

func (s *Server) fail(err error) {
	s.once.Do(func() {
		s.log.Error("step cannot go on", "error", err)
		if s.cfg.OnFatal != nil {
			s.cfg.OnFatal(err)
		}
	})
}

// accept serves the listener: each connection is one forwarded message,
// u32 uid | u32 length | data, written by slurmd (_rpc_forward_data).
func (s *Server) accept() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("accept", "error", err)
			}
			return
		}
		go s.readInbound(c)
	}
}

func (s *Server) readInbound(c *net.UnixConn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(inboundReadTimeout))
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		s.log.Warn("forwarded message cut short", "error", err)
		return
	}
	uid, n := binary.BigEndian.Uint32(hdr[:]), binary.BigEndian.Uint32(hdr[4:])
	if uid != 0 && uid != s.cfg.Job.UID {
		s.log.Warn("forwarded message refused: sender is neither root nor the step's user", "uid", uid)
		return
	}
	if n > maxFrame {
		s.log.Warn("forwarded message refused: too long", "length", n)
		return
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c, data); err != nil {
		s.log.Warn("forwarded message cut short", "length", n, "error", err)
		return
	}
	if err := s.ex.inbound(data); err != nil {
		s.log.Warn("forwarded message dropped", "error", err)
	}
}

// Close stops the helper, the listener and the timers and removes the
// socket and the directories (pmixp_libpmix_finalize). Safe to call twice.
func (s *Server) Close() {
	s.close.Do(func() {
		if s.ex != nil {
			s.ex.stop()
		}
		if s.h != nil {
			s.h.close()
		}
		if s.ln != nil {
			s.ln.Close()
			os.Remove(s.sock)
		}
		s.wg.Wait()
		for i := len(s.dirs) - 1; i >= 0; i-- {
			if err := os.RemoveAll(s.dirs[i]); err != nil {
				s.log.Warn("cannot remove", "path", s.dirs[i], "error", err)
			}
		}
	})
}

// ParseTimeout reads SLURM_PMIX_TIMEOUT (seconds) as pmixp_info.c does:
// unset or not a positive number keeps the default.
func ParseTimeout(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return DefaultTimeout
	}
	return time.Duration(n) * time.Second
}
