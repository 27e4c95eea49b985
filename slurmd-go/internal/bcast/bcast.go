package bcast

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/pierrec/lz4/v4"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named bounds.
const (
	// StallTimeout drops a transfer that got no block for this long
	// (FILE_BCAST_TIMEOUT).
	StallTimeout = 300 * time.Second
	// IOTimeout bounds the file work of one block (open, write, metadata);
	// a block that takes longer is answered SLURM_ERROR.
	IOTimeout = 60 * time.Second
	// MaxUncompressed caps a block's declared uncompressed length: sbcast
	// sends at most 10 times its block size (srun --bcast: 8 MiB blocks).
	MaxUncompressed = 256 << 20
)

// Config is what the server reads per request; the daemon may swap it on
// reconfigure (Server.SetConfig).
type Config struct {
	NodeName string
	// Auth decodes cred/munge signatures.
	Auth auth.Authenticator
	// Tokens verifies cred/slurm credentials; nil under cred/munge.
	Tokens       TokenVerifier
	SlurmUserUID uint32
	// Started is when the daemon started (22.05's revalidation window).
	Started time.Time
}

// Request is one REQUEST_FILE_BCAST with the RPC's authenticated identity.
type Request struct {
	Version  uint16
	UID, GID uint32
	Msg      *slurmproto.FileBcast
}

// Result is the answer: RC in a RESPONSE_SLURM_RC. Malformed: the release
// refused the message while unpacking it (24.11 on, a first block whose
// credential fails), answered ESLURM_PROTOCOL_INCOMPLETE_PACKET.
type Result struct {
	RC        uint32
	Malformed bool
}

// Server holds the node's transfers. Safe for concurrent use.
type Server struct {
	log    hclog.Logger
	config func() Config
	now    func() time.Time

	mu      sync.Mutex
	files   map[fileKey]*transfer // guarded by mu
	libdirs []*libdir             // guarded by mu
	sigs    map[sigKey]struct{}   // guarded by mu: 22.05's verified signatures

	ioTimeout time.Duration // IOTimeout; shorter in tests
}

type fileKey struct {
	uid, job uint32
	fname    string
}

// transfer is one file being written (file_bcast_info_t).
type transfer struct {
	mu     sync.Mutex // serializes the blocks' writes
	f      *os.File   // guarded by mu; nil once closed
	fname  string
	uid    uint32
	gid    uint32
	gids   []uint32
	job    uint32
	credID string
	last   time.Time // guarded by Server.mu
}

// libdir is the <exe>_libs directory of a --send-libs transfer (libdir_rec_t).
type libdir struct {
	uid, job, step uint32
	dir            string
	exe            string // the executable's path (matched from 24.11)
	last           time.Time
}

// New returns a server; config is read per request.
func New(config func() Config, log hclog.Logger) *Server {
	return &Server{log: log.Named("bcast"), config: config, now: time.Now,
		files: map[fileKey]*transfer{}, sigs: map[sigKey]struct{}{}, ioTimeout: IOTimeout}
}

func (s *Server) cfg() Config { return s.config() }

// Serve handles one block. Any goroutine; it blocks on munged and the disk,
// each bounded by a named timeout.
func (s *Server) Serve(ctx context.Context, r Request) Result {
	m := r.Msg
	s.sweep()
	a, err := s.checkCred(ctx, r.Version, r.UID, r.GID, m)
	if err != nil {
		s.log.Error("invalid sbcast credential", "uid", r.UID, "error", err)
		var e *errCred
		if errors.As(err, &e) && e.malformed {
			return Result{RC: slurmproto.ESlurmProtocolIncompletePacket, Malformed: true}
		}
		return Result{RC: slurmproto.ESlurmdInvalidJobCredential}
	}
	log := s.log.With("uid", r.UID, "job_id", a.job)
	fname, rc := s.destination(r.Version, a, m)
	if rc != 0 {
		return Result{RC: rc}
	}
	key := fileKey{uid: r.UID, job: a.job, fname: fname}
	if m.BlockNo == 1 {
		log.Info("sbcast", "fname", fname, "block_no", m.BlockNo)
		if rc := s.register(ctx, r.Version, a, m, key); rc != 0 {
			return Result{RC: rc}
		}
	} else {
		log.Debug("sbcast", "fname", fname, "block_no", m.BlockNo)
	}
	s.mu.Lock()
	t := s.files[key]
	if t != nil {
		t.last = s.now()
	}
	s.mu.Unlock()
	if t == nil {
		log.Error("no registered file transfer", "fname", fname)
		return Result{RC: slurmproto.SlurmError}
	}
	if t.credID != a.id {
		// Stricter than stock (which does not look): a transfer's blocks all
		// come with the credential that opened it.
		log.Error("security violation: block with another credential than the transfer's", "fname", fname)
		return Result{RC: slurmproto.ESlurmdInvalidJobCredential}
	}
	data, err := decompress(m)
	if err != nil {
		log.Error("sbcast: data decompression error", "fname", fname, "error", err)
		return Result{RC: slurmproto.SlurmError}
	}
	last := m.Flags&slurmproto.FileBcastLastBlock != 0
	_, err = bounded(ctx, s.ioTimeout, func() (struct{}, error) { return struct{}{}, t.write(data, last, m, log) }, nil)
	if err != nil {
		log.Error("sbcast: can't write", "fname", fname, "error", err)
		if last {
			// t.write closed the file; the transfer is over.
			s.drop(key, t)
		}
		return Result{RC: slurmproto.SlurmError}
	}
	if last {
		s.drop(key, t)
	}
	return Result{}
}

// drop forgets the finished transfer t unless a newer one of the same file
// replaced it.
func (s *Server) drop(key fileKey, t *transfer) {
	s.mu.Lock()
	if s.files[key] == t {
		delete(s.files, key)
	}
	s.mu.Unlock()
}

// destination is the file a block is for: a library of --send-libs goes
// into its executable's <exe>_libs directory, and a path ending in '/'
// (srun --bcast=<dir>/) gets stock's per-node name.
func (s *Server) destination(version uint16, a credArgs, m *slurmproto.FileBcast) (string, uint32) {
	fname := slurmproto.CString(m.FName)
	if fname == "" {
		s.log.Error("sbcast: no destination file name", "uid", a.uid, "job_id", a.job)
		return "", slurmproto.SlurmError
	}
	if m.Flags&slurmproto.FileBcastSO != 0 {
		exe := slurmproto.CString(m.ExeFName)
		if version >= slurmproto.Version2605 && strings.HasSuffix(exe, "/") {
			exe += s.defaultName(a)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, l := range s.libdirs {
			// The first match, as stock: in 22.05 an earlier sbcast
			// --send-libs of the job whose credential named the same step
			// takes the libraries.
			if l.uid == a.uid && l.job == a.job && l.step == a.step && (version < slurmproto.Version2411 || l.exe == exe) {
				l.last = s.now()
				return l.dir + "/" + fname, 0
			}
		}
		s.log.Error("could not find library directory for transfer", "uid", a.uid, "job_id", a.job)
		return "", slurmproto.SlurmError
	}
	if strings.HasSuffix(fname, "/") {
		fname += s.defaultName(a)
	}
	return fname, 0
}

// defaultName is BCAST_FILE_FMT, the name the step manager also execs.
func (s *Server) defaultName(a credArgs) string {
	return stepapi.BcastFileName(a.job, a.step, s.cfg().NodeName)
}

// register opens the file of a first block as the user
// (_file_bcast_register_file); the answer to a failed open is its errno.
func (s *Server) register(ctx context.Context, version uint16, a credArgs, m *slurmproto.FileBcast, key fileKey) uint32 {
	gids := a.gids
	if len(gids) == 0 {
		gids = lookupGroups(a.uid, a.gid)
	}
	t := &transfer{fname: key.fname, uid: a.uid, gid: a.gid, gids: gids, job: a.job, credID: a.id, last: s.now()}
	force := m.Flags&slurmproto.FileBcastForce != 0
	type opened struct {
		f   *os.File
		dir string
	}
	o, err := bounded(ctx, s.ioTimeout, func() (opened, error) {
		f, err := openAs(t.cred(), key.fname, force)
		if err != nil {
			return opened{}, err
		}
		var dir string
		if m.Flags&slurmproto.FileBcastExe != 0 {
			dir = key.fname + "_libs"
			// From 24.11 --force replaces an existing directory; 22.05 refuses it.
			if err := mkdirAs(t.cred(), dir, force && version >= slurmproto.Version2411); err != nil {
				f.Close()
				return opened{}, fmt.Errorf("unable to create directory %s: %w", dir, err)
			}
		}
		return opened{f: f, dir: dir}, nil
	}, func(late opened) {
		// Nobody holds the transfer any more: its descriptor must not stay open.
		s.log.Error("sbcast: open finished after its bound, closed", "fname", key.fname, "uid", a.uid)
		late.f.Close()
	})
	if err != nil {
		s.log.Error("unable to open", "fname", key.fname, "uid", a.uid, "error", err)
		return errnoRC(err)
	}
	t.f = o.f
	dir := o.dir
	s.mu.Lock()
	if old := s.files[key]; old != nil {
		// The same file again before the last transfer of it finished:
		// the new transfer replaces the old.
		go old.close()
	}
	s.files[key] = t
	if dir != "" {
		s.libdirs = append(s.libdirs, &libdir{uid: a.uid, job: a.job, step: a.step, dir: dir, exe: key.fname, last: s.now()})
	}
	s.mu.Unlock()
	return 0
}

// LibDirs returns the library directories of the step's --send-libs
// transfers, oldest first (a launch puts them in LD_LIBRARY_PATH).
func (s *Server) LibDirs(uid, job, step uint32) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.libdirs {
		if l.uid == uid && l.job == job && l.step == step {
			out = append(out, l.dir)
		}
	}
	return out
}

// JobEnded drops the job's transfers and library directories
// (_file_bcast_job_cleanup, on REQUEST_TERMINATE_JOB and REQUEST_ABORT_JOB).
func (s *Server) JobEnded(job uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.files {
		if k.job == job {
			s.log.Debug("removing file_bcast transfer of an ended job", "job_id", job, "fname", k.fname)
			delete(s.files, k)
			go t.close()
		}
	}
	s.libdirs = dropLibdirs(s.libdirs, func(l *libdir) bool { return l.job == job })
}

// sweep drops stalled transfers (_file_bcast_cleanup).
func (s *Server) sweep() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.files {
		if now.Sub(t.last) > StallTimeout {
			s.log.Error("removing stalled file_bcast transfer", "uid", k.uid, "fname", k.fname)
			delete(s.files, k)
			go t.close()
		}
	}
	s.libdirs = dropLibdirs(s.libdirs, func(l *libdir) bool { return now.Sub(l.last) > StallTimeout })
}

func dropLibdirs(ls []*libdir, drop func(*libdir) bool) []*libdir {
	out := ls[:0]
	for _, l := range ls {
		if !drop(l) {
			out = append(out, l)
		}
	}
	return out
}

// decompress returns the block's data (bcast_decompress_data): lz4 is the
// only compression 22.05, 24.11 and 26.05 know.
func decompress(m *slurmproto.FileBcast) ([]byte, error) {
	switch m.Compress {
	case slurmproto.CompressOff:
		return m.Block, nil
	case slurmproto.CompressLZ4:
		if len(m.Block) == 0 {
			return nil, nil
		}
		if m.UncompLen > MaxUncompressed {
			return nil, fmt.Errorf("bcast: uncompressed length %d over %d", m.UncompLen, MaxUncompressed)
		}
		out := make([]byte, m.UncompLen)
		n, err := lz4.UncompressBlock(m.Block, out)
		if err != nil {
			return nil, fmt.Errorf("bcast: lz4: %w", err)
		}
		if n != int(m.UncompLen) {
			return nil, fmt.Errorf("bcast: lz4 decompression error, original block length %d != decompressed length %d", m.UncompLen, n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("bcast: compression type %d not supported", m.Compress)
}

// bounded runs fn on its own goroutine and waits at most d (or ctx). A
// timed-out fn finishes in the background; if it then succeeds, undo (when
// not nil) gets its result, which nobody else will see.
func bounded[T any](ctx context.Context, d time.Duration, fn func() (T, error), undo func(T)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		if undo != nil {
			go func() {
				if r := <-done; r.err == nil {
					undo(r.v)
				}
			}()
		}
		var zero T
		return zero, fmt.Errorf("bcast: file work not done within %s: %w", d, ctx.Err())
	}
}

// errnoRC is the answer to a failed open: its errno, as the stock child
// process exits with it; anything else is SLURM_ERROR.
func errnoRC(err error) uint32 {
	var e syscall.Errno
	if errors.As(err, &e) {
		return uint32(e)
	}
	return slurmproto.SlurmError
}

// lookupGroups is group_cache_lookup: the user's groups from the node's
// user database, primary gid first, when the credential carries none; only
// the primary gid when the user is unknown here, as stock.
func lookupGroups(uid, gid uint32) []uint32 {
	id, err := authslurm.LookupIdentity(uid, gid, false)
	if err != nil {
		return []uint32{gid}
	}
	return id.GIDs
}

// ServeBcast implements handlers.Bcast.
func (s *Server) ServeBcast(ctx context.Context, version uint16, uid, gid uint32, msg *slurmproto.FileBcast) uint32 {
	return s.Serve(ctx, Request{Version: version, UID: uid, GID: gid, Msg: msg}).RC
}
