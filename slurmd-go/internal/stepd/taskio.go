//go:build linux

package stepd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fname"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepio"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named bounds of the step's I/O (the framing itself is internal/stepio).
const (
	// IOConnectTimeout bounds connecting to srun's or sattach's I/O port.
	IOConnectTimeout = 10 * time.Second
	// IOStallTimeout drops a client that takes no output for this long,
	// so that one stuck sattach cannot stall the tasks for ever.
	IOStallTimeout = 5 * time.Minute
)

// stepIO is the step's I/O: the mux that frames task output for srun and
// sattach clients and routes their stdin, and the task ends of the pipes.
type stepIO struct {
	mux   *stepio.Mux
	child [][3]*os.File // per task: the ends the task gets
	files []*os.File    // label files this process writes
}

// labelWriter prefixes every line with the task's label ("%*d: ").
type labelWriter struct {
	w       io.Writer
	label   string
	atStart bool
}

func (l *labelWriter) Write(p []byte) (int, error) {
	var b []byte
	for _, c := range p {
		if l.atStart {
			b = append(b, l.label...)
		}
		b = append(b, c)
		l.atStart = c == '\n'
	}
	if _, err := l.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// setupIO prepares every task's stdio (io_init_tasks_stdio) and connects
// to srun. umask applies to files created as the user.
func (s *Step) setupIO(umask int) error {
	m := s.launch
	sio := &stepIO{child: make([][3]*os.File, len(s.tasks))}
	s.sio = sio
	label := m.Flags&slurmproto.LaunchLabelIO != 0
	isPTY := m.Flags&slurmproto.LaunchPTY != 0
	flags := s.outputFlags(m.OpenMode)
	tasks := make([]stepio.Task, len(s.tasks))
	// Label files are shared by the tasks that name the same file.
	labelFiles := map[string]*os.File{}
	width := len(strconv.Itoa(max(len(s.tasks)-1, 0)))
	var labelled func(name string) (io.Writer, error)
	for i, t := range s.tasks {
		labelled = func(name string) (io.Writer, error) {
			if name == "" || name == "/dev/null" {
				return nil, nil
			}
			f := labelFiles[name]
			if f == nil {
				var err error
				if f, err = os.OpenFile(name, flags, 0o666); err != nil {
					return nil, err
				}
				labelFiles[name] = f
				sio.files = append(sio.files, f)
			}
			return &labelWriter{w: f, label: fmt.Sprintf("%*d: ", width, t.gtid), atStart: true}, nil
		}
		tasks[i] = stepio.Task{GTaskID: uint16(t.gtid), LTaskID: uint16(t.ltid)}
		in, out, errName := s.stdioNames(t)
		if isPTY {
			if t.gtid == 0 {
				master, slave, err := pty.Open()
				if err != nil {
					return fmt.Errorf("stepd: openpty: %w", err)
				}
				_ = os.Chown(slave.Name(), int(s.uid), -1)
				s.pty = master
				s.setInitialWinsize()
				sio.child[i] = [3]*os.File{slave, slave, slave}
				stdin, err := dupFile(master)
				if err != nil {
					return err
				}
				// One terminal: stdout and stderr both come out of the
				// master, as stock's single stdout object.
				tasks[i].Stdout, tasks[i].Stdin = master, stdin
				continue
			}
			in, out, errName = "/dev/null", "/dev/null", "/dev/null"
		}
		var files [3]*os.File
		err := proc.DoAs(proc.Cred{UID: s.uid, GID: s.gid, Groups: s.gids}, umask, func() error {
			var err error
			if in != "" {
				if files[0], err = os.Open(in); err != nil {
					return fmt.Errorf("could not open stdin file %s: %w", in, err)
				}
			}
			if label {
				// --label with a per-task or per-node file: the step
				// manager writes the file and labels each line, srun
				// only sees the EOFs (mgr.c io_create_local_client).
				if tasks[i].StdoutLocal, err = labelled(out); err != nil {
					return fmt.Errorf("could not open output file %s: %w", out, err)
				}
				if tasks[i].StderrLocal, err = labelled(errName); err != nil {
					return fmt.Errorf("could not open error file %s: %w", errName, err)
				}
			}
			if out != "" && (!label || out == "/dev/null") {
				if files[1], err = s.openOutput(out, flags); err != nil {
					return fmt.Errorf("could not open stdout file %s: %w", out, err)
				}
			}
			if errName != "" && (!label || errName == "/dev/null") {
				if files[2], err = s.openOutput(errName, flags); err != nil {
					return fmt.Errorf("could not open stderr file %s: %w", errName, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if files[0] == nil {
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			files[0], tasks[i].Stdin = r, w
		}
		for k := 1; k <= 2; k++ {
			if files[k] != nil {
				continue
			}
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			files[k] = w
			if k == 1 {
				tasks[i].Stdout = r
			} else {
				tasks[i].Stderr = r
			}
		}
		sio.child[i] = files
	}
	// slurmstepd's own errors go to task 0's stderr (job_log_init).
	if f := sio.child[0][2]; f != nil {
		if d, err := dupFile(f); err == nil {
			s.mu.Lock()
			s.stderr = d
			s.mu.Unlock()
		}
	}
	mux, err := stepio.New(stepio.Config{
		Tasks:        tasks,
		LineBuffered: m.Flags&slurmproto.LaunchBufferedIO != 0,
		StallTimeout: IOStallTimeout,
		DialTimeout:  IOConnectTimeout,
		ReplayFrames: stepio.StockReplayFrames,
	}, s.log.Named("io"))
	if err != nil {
		return fmt.Errorf("stepd: io: %w", err)
	}
	sio.mux = mux
	if host, ok := s.srunHost(m.IOPorts); ok {
		ctx, cancel := context.WithTimeout(context.Background(), IOConnectTimeout)
		_, err := mux.Attach(ctx, host, s.ioInit(s.ioKey()))
		cancel()
		if err != nil {
			mux.Close()
			return fmt.Errorf("stepd: connect io %s: %w", host, err)
		}
	}
	mux.Start()
	if isPTY {
		go s.windowManager()
	}
	return nil
}

// ioInit is the init message for a client; the mux fills in the counts.
func (s *Step) ioInit(key []byte) stepio.InitMsg {
	return stepio.InitMsg{Version: stepio.InitVersion(s.spec.ProtocolVersion), NodeID: uint32(s.nodeID), IOKey: key}
}

// ioKey is the credential's signature bytes as srun compares them.
func (s *Step) ioKey() []byte {
	if s.launch.Cred == nil {
		return nil
	}
	return s.launch.Cred.Signature
}

// stdioNames expands one task's ifname/ofname/efname: "" means the stream
// to srun (slurmstepd_job.c _expand_stdio_filename).
func (s *Step) stdioNames(t *stepTask) (in, out, errName string) {
	m := s.launch
	j := fname.Job{
		JobID: s.id.JobID, StepID: s.id.StepID, ArrayTaskID: slurmproto.NoVal,
		NodeID: uint32(s.nodeID), UserName: s.userName, Hostname: s.patternHost(), Cwd: s.cwd,
	}
	expand := func(pat string) string {
		pat = slurmproto.CString(pat)
		if pat == "" {
			return ""
		}
		if id, ok := fname.SingleTask(pat); ok {
			if uint32(id) == t.gtid {
				return ""
			}
			return "/dev/null"
		}
		return fname.Batch(pat, j, int(t.gtid))
	}
	return expand(m.IFName), expand(m.OFName), expand(m.EFName)
}

// taskStdio hands task i its three files (closed by forkTasks after fork).
func (s *Step) taskStdio(i int) ([3]*os.File, error) {
	f := s.sio.child[i]
	if s.pty != nil && i == 0 {
		// One terminal for the three: give the task three descriptors.
		d1, err1 := dupFile(f[0])
		d2, err2 := dupFile(f[0])
		if err := errors.Join(err1, err2); err != nil {
			return f, err
		}
		return [3]*os.File{f[0], d1, d2}, nil
	}
	return f, nil
}

// closeUnstartedStdio closes the tasks' ends of their stdio when the launch
// failed before any fork, so that the I/O drains at once instead of
// waiting for output no task will write.
func (s *Step) closeUnstartedStdio() {
	if s.sio == nil {
		return
	}
	for _, files := range s.sio.child {
		closeAll(files)
	}
}

func dupFile(f *os.File) (*os.File, error) {
	d, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(d)
	return os.NewFile(uintptr(d), f.Name()), nil
}

// attach adds an sattach client: it gets recent output, then live output.
func (sio *stepIO) attach(s *Step, addr string, key []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), IOConnectTimeout)
	defer cancel()
	_, err := sio.mux.Attach(ctx, addr, s.ioInit(key))
	return err
}

// closeIO waits (up to d) for every task stream to reach EOF and its
// frames to be written, then closes the client connections.
func (s *Step) closeIO(d time.Duration) {
	sio := s.sio
	if sio == nil || sio.mux == nil {
		return
	}
	s.mu.Lock()
	if s.stderr != nil {
		s.stderr.Close()
		s.stderr = nil
	}
	s.mu.Unlock()
	if err := sio.mux.Wait(d); err != nil {
		s.log.Warn("task output still open after the tasks ended; closed", "timeout", d, "error", err)
	}
	for _, f := range sio.files {
		f.Close()
	}
}

// setInitialWinsize applies SLURM_PTY_WIN_ROW/COL from srun.
func (s *Step) setInitialWinsize() {
	rows, _ := s.env.Get("SLURM_PTY_WIN_ROW")
	cols, _ := s.env.Get("SLURM_PTY_WIN_COL")
	r, _ := strconv.Atoi(rows)
	c, _ := strconv.Atoi(cols)
	if r > 0 && c > 0 {
		_ = pty.Setsize(s.pty, &pty.Winsize{Rows: uint16(r), Cols: uint16(c)})
	}
}

// windowManager is io.c _window_manager: srun sends window size changes
// (pty_winsz_t: u16 cols, then u16 rows, network order) on SLURM_PTY_PORT.
func (s *Step) windowManager() {
	port, ok := s.env.Get("SLURM_PTY_PORT")
	if !ok || !s.launch.OrigAddr.AddrPort.IsValid() {
		return
	}
	host := net.JoinHostPort(s.launch.OrigAddr.AddrPort.Addr().String(), port)
	c, err := net.DialTimeout("tcp", host, IOConnectTimeout)
	if err != nil {
		s.log.Debug("pty window manager", "error", err)
		return
	}
	defer c.Close()
	var b [4]byte
	for {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return
		}
		_ = pty.Setsize(s.pty, parseWinsz(b))
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGWINCH)
		}
	}
}

// parseWinsz decodes srun's pty_winsz_t: columns first (srun_pty.c).
func parseWinsz(b [4]byte) *pty.Winsize {
	return &pty.Winsize{Cols: binary.BigEndian.Uint16(b[0:]), Rows: binary.BigEndian.Uint16(b[2:])}
}
