//go:build linux

package stepd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fname"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// srun's I/O protocol (src/common/io_hdr.[ch], slurmstepd/io.c): after an
// init message carrying the credential signature as key, both directions
// carry frames of a 10-byte header (u16 type, u16 gtaskid, u16 ltaskid,
// u32 length) and at most ioMaxMsgLen bytes; length 0 is EOF.
const (
	ioTypeStdin    uint16 = 0
	ioTypeStdout   uint16 = 1
	ioTypeStderr   uint16 = 2
	ioTypeAllStdin uint16 = 3
	ioTypeConnTest uint16 = 4

	ioHeaderLen = 10
	ioMaxMsgLen = 1024
)

// Named bounds of the I/O layer.
const (
	// IOConnectTimeout bounds connecting to srun's I/O port.
	IOConnectTimeout = 10 * time.Second
	// IOWriteTimeout drops a client that takes no output for this long, so
	// that one stuck sattach cannot stall the tasks for ever.
	IOWriteTimeout = 5 * time.Minute
	// ioQueueFrames bounds the frames waiting for the clients: a slow srun
	// fills the queue, then the task pipes, then the tasks block.
	ioQueueFrames = 64
)

// ioFrame is one outgoing frame.
type ioFrame struct {
	typ        uint16
	gtid, ltid uint16
	data       []byte
}

func (f ioFrame) encode() []byte {
	b := make([]byte, ioHeaderLen, ioHeaderLen+len(f.data))
	binary.BigEndian.PutUint16(b[0:], f.typ)
	binary.BigEndian.PutUint16(b[2:], f.gtid)
	binary.BigEndian.PutUint16(b[4:], f.ltid)
	binary.BigEndian.PutUint32(b[6:], uint32(len(f.data)))
	return append(b, f.data...)
}

// ioInitMsg is io_init_msg_pack for the 22.05 layout.
func ioInitMsg(nodeID, stdoutObjs, stderrObjs uint32, key []byte) []byte {
	p := slurmproto.NewPacker(64 + len(key))
	p.U16(slurmproto.Version2205)
	p.U32(nodeID)
	p.U32(stdoutObjs)
	p.U32(stderrObjs)
	p.Mem(key)
	body := p.Bytes()
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	return append(out, body...)
}

// ioClient is one srun or sattach connection.
type ioClient struct {
	conn net.Conn
	mu   sync.Mutex // serializes writes (frames and CONNECTION_TEST echoes)
	dead bool       // guarded by mu
}

func (c *ioClient) write(b []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return false
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(IOWriteTimeout))
	if _, err := c.conn.Write(b); err != nil {
		c.dead = true
		return false
	}
	return true
}

// stepIO is the step's I/O: task pipes or a terminal, files, and the
// connections to srun and sattach clients.
type stepIO struct {
	s        *Step
	queue    chan ioFrame
	mu       sync.Mutex
	clients  []*ioClient // guarded by mu
	stdin    map[uint32]io.WriteCloser
	readers  sync.WaitGroup // task output readers
	done     chan struct{}  // closed when the writer has sent the last frame
	child    [][3]*os.File  // per task: the ends the task gets
	stdout   int            // streams announced as stdout objects
	stderr   int
	buffered bool
}

// setupIO prepares every task's stdio (io_init_tasks_stdio) and connects
// to srun. umask applies to files created as the user.
func (s *Step) setupIO(umask int) error {
	m := s.launch
	sio := &stepIO{
		s: s, queue: make(chan ioFrame, ioQueueFrames), done: make(chan struct{}),
		stdin:    map[uint32]io.WriteCloser{},
		child:    make([][3]*os.File, len(s.tasks)),
		buffered: m.Flags&slurmproto.LaunchBufferedIO != 0,
	}
	s.sio = sio
	label := m.Flags&slurmproto.LaunchLabelIO != 0
	isPTY := m.Flags&slurmproto.LaunchPTY != 0
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	switch m.OpenMode {
	case slurmproto.OpenModeAppend:
	case slurmproto.OpenModeTruncate:
		flags |= os.O_TRUNC
	default:
		if !s.spec.JobFileAppend {
			flags |= os.O_TRUNC
		}
	}
	var outputs []struct {
		r    *os.File
		typ  uint16
		t    *stepTask
		line bool
	}
	for i, t := range s.tasks {
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
				sio.stdin[t.gtid] = master
				outputs = append(outputs, struct {
					r    *os.File
					typ  uint16
					t    *stepTask
					line bool
				}{master, ioTypeStdout, t, false})
				sio.stdout++
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
			if out != "" && (!label || out == "/dev/null") {
				if files[1], err = os.OpenFile(out, flags, 0o666); err != nil {
					return fmt.Errorf("could not open stdout file %s: %w", out, err)
				}
			}
			if errName != "" && (!label || errName == "/dev/null") {
				if files[2], err = os.OpenFile(errName, flags, 0o666); err != nil {
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
			files[0] = r
			sio.stdin[t.gtid] = w
		}
		for k, typ := range []uint16{ioTypeStdout, ioTypeStderr} {
			if files[k+1] != nil {
				continue
			}
			r, w, err := os.Pipe()
			if err != nil {
				return err
			}
			files[k+1] = w
			outputs = append(outputs, struct {
				r    *os.File
				typ  uint16
				t    *stepTask
				line bool
			}{r, typ, t, sio.buffered})
			if typ == ioTypeStdout {
				sio.stdout++
			} else {
				sio.stderr++
			}
		}
		sio.child[i] = files
	}
	// slurmstepd's own errors go to task 0's stderr (job_log_init).
	if f := sio.child[0][2]; f != nil {
		if d, err := syscall.Dup(int(f.Fd())); err == nil {
			syscall.CloseOnExec(d)
			s.mu.Lock()
			s.stderr = os.NewFile(uintptr(d), "stderr")
			s.mu.Unlock()
		}
	}
	if host, ok := s.srunHost(m.IOPorts); ok {
		c, err := net.DialTimeout("tcp", host, IOConnectTimeout)
		if err != nil {
			return fmt.Errorf("stepd: connect io %s: %w", host, err)
		}
		key := s.ioKey()
		if _, err := c.Write(ioInitMsg(uint32(s.nodeID), uint32(sio.stdout), uint32(sio.stderr), key)); err != nil {
			c.Close()
			return fmt.Errorf("stepd: io init to %s: %w", host, err)
		}
		cl := &ioClient{conn: c}
		sio.clients = append(sio.clients, cl)
		go sio.readClient(cl, true)
	}
	for _, o := range outputs {
		sio.readers.Add(1)
		go sio.readTask(o.r, o.typ, o.t, o.line)
	}
	go sio.writer()
	if isPTY {
		go s.windowManager()
	}
	return nil
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
		NodeID: uint32(s.nodeID), UserName: s.userName, Hostname: s.spec.Hostname, Cwd: s.cwd,
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

// afterFork closes the task ends of the pipes in this process.
func (s *Step) afterFork() {}

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

func dupFile(f *os.File) (*os.File, error) {
	d, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(d)
	return os.NewFile(uintptr(d), f.Name()), nil
}

// readTask turns one task output stream into frames; line mode forwards
// complete lines only (LAUNCH_BUFFERED_IO), as stdout buffering would.
func (sio *stepIO) readTask(r *os.File, typ uint16, t *stepTask, line bool) {
	defer sio.readers.Done()
	defer r.Close()
	send := func(b []byte) {
		sio.queue <- ioFrame{typ: typ, gtid: uint16(t.gtid), ltid: uint16(t.ltid), data: b}
	}
	if line {
		br := bufio.NewReaderSize(r, ioMaxMsgLen)
		for {
			b, err := br.ReadSlice('\n')
			if len(b) > 0 {
				send(bytes.Clone(b))
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
	} else {
		buf := make([]byte, ioMaxMsgLen)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				send(bytes.Clone(buf[:n]))
			}
			if err != nil {
				// EIO is how a terminal master reports that the slave closed.
				break
			}
		}
	}
	send(nil) // EOF for this stream
}

// writer sends queued frames to every live client.
func (sio *stepIO) writer() {
	defer close(sio.done)
	for f := range sio.queue {
		b := f.encode()
		sio.mu.Lock()
		clients := append([]*ioClient(nil), sio.clients...)
		sio.mu.Unlock()
		for _, c := range clients {
			c.write(b)
		}
	}
}

// readClient reads stdin and connection tests from a client.
func (sio *stepIO) readClient(c *ioClient, acceptStdin bool) {
	var hdr [ioHeaderLen]byte
	for {
		if _, err := io.ReadFull(c.conn, hdr[:]); err != nil {
			return
		}
		typ := binary.BigEndian.Uint16(hdr[0:])
		gtid := binary.BigEndian.Uint16(hdr[2:])
		n := binary.BigEndian.Uint32(hdr[6:])
		if n > ioMaxMsgLen {
			sio.s.log.Error("io frame too long, dropping client", "length", n)
			c.conn.Close()
			return
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(c.conn, data); err != nil {
			return
		}
		switch typ {
		case ioTypeConnTest:
			c.write(ioFrame{typ: ioTypeConnTest}.encode())
		case ioTypeStdin, ioTypeAllStdin:
			if !acceptStdin {
				continue
			}
			sio.mu.Lock()
			var targets []uint32
			if typ == ioTypeAllStdin {
				for id := range sio.stdin {
					targets = append(targets, id)
				}
			} else {
				targets = []uint32{uint32(gtid)}
			}
			sio.mu.Unlock()
			for _, id := range targets {
				sio.toStdin(id, data)
			}
		}
	}
}

// toStdin writes to a task's stdin; an empty frame closes it.
func (sio *stepIO) toStdin(gtid uint32, data []byte) {
	sio.mu.Lock()
	w := sio.stdin[gtid]
	sio.mu.Unlock()
	if w == nil {
		return
	}
	if len(data) == 0 {
		if sio.s.pty != nil && w == io.WriteCloser(sio.s.pty) {
			_, _ = w.Write([]byte{4}) // ^D: the terminal's EOF
			return
		}
		w.Close()
		sio.mu.Lock()
		delete(sio.stdin, gtid)
		sio.mu.Unlock()
		return
	}
	if _, err := w.Write(data); err != nil {
		// The task closed its stdin: drop what srun still sends.
		sio.mu.Lock()
		delete(sio.stdin, gtid)
		sio.mu.Unlock()
		w.Close()
	}
}

// attach adds an sattach client: it gets output from now on.
func (sio *stepIO) attach(c net.Conn, nodeID uint32, key []byte) error {
	if _, err := c.Write(ioInitMsg(nodeID, uint32(sio.stdout), uint32(sio.stderr), key)); err != nil {
		return err
	}
	cl := &ioClient{conn: c}
	sio.mu.Lock()
	sio.clients = append(sio.clients, cl)
	sio.mu.Unlock()
	go sio.readClient(cl, false)
	return nil
}

// closeIO waits (up to d) for every task stream to reach EOF and its
// frames to be written, then closes the client connections.
func (s *Step) closeIO(d time.Duration) {
	sio := s.sio
	if sio == nil {
		return
	}
	s.mu.Lock()
	if s.stderr != nil {
		s.stderr.Close()
		s.stderr = nil
	}
	s.mu.Unlock()
	readersDone := make(chan struct{})
	go func() { sio.readers.Wait(); close(readersDone) }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-readersDone:
		close(sio.queue)
		select {
		case <-sio.done:
		case <-timer.C:
		}
	case <-timer.C:
		s.log.Warn("task output still open after the tasks ended; closing", "timeout", d)
	}
	sio.mu.Lock()
	clients := sio.clients
	for _, w := range sio.stdin {
		w.Close()
	}
	sio.mu.Unlock()
	for _, c := range clients {
		if tc, ok := c.conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		c.conn.Close()
	}
	if s.pty != nil {
		s.pty.Close()
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
// (u16 rows, u16 cols, network order) on SLURM_PTY_PORT.
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
		rows, cols := binary.BigEndian.Uint16(b[0:]), binary.BigEndian.Uint16(b[2:])
		_ = pty.Setsize(s.pty, &pty.Winsize{Rows: rows, Cols: cols})
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGWINCH)
		}
	}
}
