//go:build linux

package stepd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepio"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// These tests run the tasks step's I/O glue (setupIO, stdioNames, attach,
// closeIO) in-process against a fake srun and sattach on loopback TCP; the
// framing itself is tested in internal/stepio. The "tasks" are the pipe
// ends setupIO hands to forkTasks, written and read by the test.

// ioWait bounds every wait of these tests.
const ioWait = 10 * time.Second

// frame is one I/O frame as a client reads it.
type frame struct {
	typ        stepio.MsgType
	gtid, ltid uint16
	data       []byte
}

// ioPeer is the client end of one I/O connection (srun or sattach): the
// init message it got and the frames that follow, read by a goroutine that
// closes the connection at EOF as srun does; frames is closed then.
type ioPeer struct {
	conn   net.Conn
	init   []byte // the init message without the u32 length (whole, if legacy)
	frames chan frame
}

// newIOPeer reads the init message (legacy: the fixed 26-byte layout
// without length) and starts the frame reader.
func newIOPeer(t *testing.T, c net.Conn, legacy bool) *ioPeer {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(ioWait))
	p := &ioPeer{conn: c, frames: make(chan frame, 4096)}
	if legacy {
		p.init = make([]byte, 26)
	} else {
		var n [4]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			t.Fatalf("init length: %v", err)
		}
		p.init = make([]byte, binary.BigEndian.Uint32(n[:]))
	}
	if _, err := io.ReadFull(c, p.init); err != nil {
		t.Fatalf("init body: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	go func() {
		defer close(p.frames)
		defer c.Close()
		var h [stepio.HeaderLen]byte
		for {
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			f := frame{typ: stepio.MsgType(binary.BigEndian.Uint16(h[0:])), gtid: binary.BigEndian.Uint16(h[2:]), ltid: binary.BigEndian.Uint16(h[4:])}
			f.data = make([]byte, binary.BigEndian.Uint32(h[6:]))
			if _, err := io.ReadFull(c, f.data); err != nil {
				return
			}
			p.frames <- f
		}
	}()
	return p
}

// checkInit checks a 22.05 init message field by field (reference §2C:
// u16 0x2600, u32 nodeid, u32 stdout_objs, u32 stderr_objs, u32 keylen, key).
func (p *ioPeer) checkInit(t *testing.T, nodeID, stdouts, stderrs uint32, key []byte) {
	t.Helper()
	want := binary.BigEndian.AppendUint16(nil, 0x2600)
	for _, v := range []uint32{nodeID, stdouts, stderrs, uint32(len(key))} {
		want = binary.BigEndian.AppendUint32(want, v)
	}
	want = append(want, key...)
	if !bytes.Equal(p.init, want) {
		t.Errorf("init message\n got %x\nwant %x", p.init, want)
	}
}

// next returns the next frame, failing after ioWait.
func (p *ioPeer) next(t *testing.T) frame {
	t.Helper()
	select {
	case f, ok := <-p.frames:
		if !ok {
			t.Fatal("connection closed while waiting for a frame")
		}
		return f
	case <-time.After(ioWait):
		t.Fatal("no frame")
	}
	return frame{}
}

// nextData returns the next frame that is not a CONNECTION_TEST answer.
func (p *ioPeer) nextData(t *testing.T) frame {
	t.Helper()
	for {
		if f := p.next(t); f.typ != stepio.TypeConnectionTest {
			return f
		}
	}
}

// none checks that no frame arrives for d.
func (p *ioPeer) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case f, ok := <-p.frames:
		if ok {
			t.Fatalf("unexpected frame %+v (%q)", f, f.data)
		}
	case <-time.After(d):
	}
}

// rest returns every frame up to the end of the connection.
func (p *ioPeer) rest(t *testing.T) []frame {
	t.Helper()
	var out []frame
	timeout := time.After(ioWait)
	for {
		select {
		case f, ok := <-p.frames:
			if !ok {
				return out
			}
			out = append(out, f)
		case <-timeout:
			t.Fatalf("connection still open; frames so far %+v", out)
		}
	}
}

// send writes one client frame (as srun: ltaskid 0xffff).
func (p *ioPeer) send(t *testing.T, typ stepio.MsgType, gtid uint16, data []byte) {
	t.Helper()
	b, err := stepio.AppendFrame(nil, stepio.Header{Type: typ, GTaskID: gtid, LTaskID: stepio.AllTasks}, data)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.conn.SetWriteDeadline(time.Now().Add(ioWait))
	if _, err := p.conn.Write(b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// ioStep is a tasks step of two local tasks (gtids 4 and 5, node 1 of the
// step) whose I/O goes to a fake srun on a loopback port.
type ioStep struct {
	s      *Step
	srun   *ioPeer
	key    []byte
	child  [][3]*os.File // the task ends of the stdio
	closed bool
}

// newIOStep builds the step, lets edit change it, runs setupIO and accepts
// srun's connection (when the launch has an I/O port).
func newIOStep(t *testing.T, edit func(s *Step)) *ioStep {
	t.Helper()
	requireRoot(t) // setupIO opens the task files as the user (proc.DoAs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	key := []byte("MUNGE:step-key:\x00")
	id := slurmproto.StepID{JobID: 42, StepID: 3, StepHetComp: slurmproto.NoVal}
	s := &Step{
		spec: &stepapi.StartSpec{NodeName: "n2", Hostname: "h2", ProtocolVersion: slurmproto.Version2205},
		launch: &slurmproto.LaunchTasks{
			StepID: id, IOPorts: []uint16{port},
			OrigAddr: slurmproto.AddrFrom(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 1)),
			Cred:     &slurmproto.Cred{Signature: key},
		},
		nodeID: 1, id: id,
		tasks: []*stepTask{{ltid: 0, gtid: 4}, {ltid: 1, gtid: 5}},
		log:   hclog.NewNullLogger(),
		uid:   0, gid: 0, gids: []uint32{0}, userName: "root", cwd: t.TempDir(),
		state: stepapi.StateRunning, stateCh: make(chan struct{}),
	}
	if edit != nil {
		edit(s)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		defer close(accepted)
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(ioWait))
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	if err := s.setupIO(-1); err != nil {
		t.Fatalf("setupIO: %v", err)
	}
	x := &ioStep{s: s, key: key, child: s.sio.child}
	t.Cleanup(func() {
		x.endTasks()
		x.closeIO(t)
		s.mu.Lock()
		if s.stderr != nil {
			s.stderr.Close()
		}
		s.mu.Unlock()
	})
	if _, ok := s.srunHost(s.launch.IOPorts); ok {
		c, ok := <-accepted
		if !ok {
			t.Fatal("the step manager did not connect to srun")
		}
		x.srun = newIOPeer(t, c, s.spec.ProtocolVersion < 0x2500)
	}
	return x
}

func (x *ioStep) out(i int) *os.File    { return x.child[i][1] }
func (x *ioStep) errOut(i int) *os.File { return x.child[i][2] }
func (x *ioStep) in(i int) *os.File     { return x.child[i][0] }

func write(t *testing.T, f *os.File, s string) {
	t.Helper()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// endTasks closes every task end, as exiting tasks do.
func (x *ioStep) endTasks() {
	for _, f := range x.child {
		closeAll(f)
	}
}

// closeIO runs the step's closeIO once, bounded.
func (x *ioStep) closeIO(t *testing.T) {
	if x.closed {
		return
	}
	x.closed = true
	done := make(chan struct{})
	go func() { x.s.closeIO(5 * time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(ioWait):
		t.Error("closeIO did not return")
	}
}

// readStdin reads what task i gets on stdin within d: the data, io.EOF
// when the stream was closed, or os.ErrDeadlineExceeded.
func (x *ioStep) readStdin(i int, d time.Duration) (string, error) {
	f := x.in(i)
	_ = f.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 4096)
	n, err := f.Read(b)
	return string(b[:n]), err
}

type streamKey struct {
	typ  stepio.MsgType
	gtid uint16
}

// streams groups frames by stream: the data before its EOF, whether an
// EOF came, and the ltid seen; it fails on anything after an EOF.
func streams(t *testing.T, frames []frame) (map[streamKey]string, map[streamKey]bool, map[streamKey]uint16) {
	t.Helper()
	data, eof, ltid := map[streamKey]string{}, map[streamKey]bool{}, map[streamKey]uint16{}
	for _, f := range frames {
		if f.typ == stepio.TypeConnectionTest {
			continue
		}
		k := streamKey{f.typ, f.gtid}
		if eof[k] {
			t.Errorf("frame after EOF of %+v: %q", k, f.data)
		}
		if len(f.data) > stepio.MaxMsgLen {
			t.Errorf("frame of %d bytes", len(f.data))
		}
		if l, ok := ltid[k]; ok && l != f.ltid {
			t.Errorf("stream %+v: ltid %d then %d", k, l, f.ltid)
		}
		ltid[k] = f.ltid
		if len(f.data) == 0 {
			eof[k] = true
		} else {
			data[k] += string(f.data)
		}
	}
	return data, eof, ltid
}

var (
	so4, so5 = streamKey{stepio.TypeStdout, 4}, streamKey{stepio.TypeStdout, 5}
	se4, se5 = streamKey{stepio.TypeStderr, 4}, streamKey{stepio.TypeStderr, 5}
)

// TestTaskIO_Output: stdout and stderr of each task reach srun as
// STDOUT/STDERR frames with the task's global and local ids, after an init
// message with this node's rank, two stdout and two stderr objects and the
// credential signature (NUL included) as key; each stream ends with one
// EOF frame, then the connection is closed. The stepd's own stderr (a dup
// of task 0's) is closed by closeIO so that stream ends too.
func TestTaskIO_Output(t *testing.T) {
	x := newIOStep(t, nil)
	x.srun.checkInit(t, 1, 2, 2, x.key)
	x.s.mu.Lock()
	if x.s.stderr == nil {
		t.Error("no stepd stderr (dup of task 0's)")
	}
	x.s.mu.Unlock()

	write(t, x.out(0), "out of task 4\n")
	write(t, x.errOut(1), "err of task 5")
	big := strings.Repeat("0123456789", 300) // 3000 bytes: at least three frames
	write(t, x.out(1), big)
	x.endTasks()
	x.closeIO(t)

	data, eof, ltid := streams(t, x.srun.rest(t))
	if data[so4] != "out of task 4\n" || data[se5] != "err of task 5" || data[so5] != big || data[se4] != "" {
		t.Errorf("stream data: %v", data)
	}
	for _, k := range []streamKey{so4, so5, se4, se5} {
		if !eof[k] {
			t.Errorf("no EOF for %+v", k)
		}
	}
	if len(eof) != 4 {
		t.Errorf("EOFs for %v, want 2 stdout + 2 stderr", eof)
	}
	if ltid[so4] != 0 || ltid[se4] != 0 || ltid[so5] != 1 || ltid[se5] != 1 {
		t.Errorf("ltids %v", ltid)
	}
	x.s.mu.Lock()
	if x.s.stderr != nil {
		t.Error("closeIO left the stepd stderr open")
	}
	x.s.mu.Unlock()
}

// TestTaskIO_LegacySrun: an srun older than 21.08 gets the legacy init
// message (0xb001, the key cut to 8 bytes, no length prefix).
func TestTaskIO_LegacySrun(t *testing.T) {
	x := newIOStep(t, func(s *Step) { s.spec.ProtocolVersion = 0x2400 })
	want := []byte{0xb0, 0x01, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 8}
	want = append(want, x.key[:8]...)
	if !bytes.Equal(x.srun.init, want) {
		t.Errorf("legacy init\n got %x\nwant %x", x.srun.init, want)
	}
}

// TestTaskIO_LineBuffered: with LAUNCH_BUFFERED_IO only complete lines
// are sent (a partial line waits for its end or EOF), and a line longer
// than a frame is split at 1024 bytes. Without it, what the task writes
// goes out as it comes.
func TestTaskIO_LineBuffered(t *testing.T) {
	x := newIOStep(t, func(s *Step) { s.launch.Flags = slurmproto.LaunchBufferedIO })
	write(t, x.out(0), "a\nb")
	if f := x.srun.nextData(t); f.typ != stepio.TypeStdout || f.gtid != 4 || string(f.data) != "a\n" {
		t.Fatalf("first frame %+v %q", f, f.data)
	}
	x.srun.none(t, 200*time.Millisecond)
	write(t, x.out(0), "c\n")
	if f := x.srun.nextData(t); string(f.data) != "bc\n" {
		t.Fatalf("second frame %q", f.data)
	}
	long := strings.Repeat("x", 1500) + "\n"
	write(t, x.out(0), long)
	if f := x.srun.nextData(t); string(f.data) != long[:stepio.MaxMsgLen] {
		t.Fatalf("long line, first part: %d bytes", len(f.data))
	}
	if f := x.srun.nextData(t); string(f.data) != long[stepio.MaxMsgLen:] {
		t.Fatalf("long line, second part: %d bytes %q", len(f.data), f.data)
	}
	write(t, x.out(0), "tail")
	x.srun.none(t, 200*time.Millisecond)
	x.out(0).Close()
	if f := x.srun.nextData(t); string(f.data) != "tail" {
		t.Fatalf("partial line at EOF: %q", f.data)
	}
	if f := x.srun.nextData(t); f.typ != stepio.TypeStdout || f.gtid != 4 || len(f.data) != 0 {
		t.Fatalf("EOF frame %+v", f)
	}

	y := newIOStep(t, nil)
	write(t, y.out(0), "no newline")
	if f := y.srun.nextData(t); string(f.data) != "no newline" {
		t.Fatalf("unbuffered: %q", f.data)
	}
}

// TestTaskIO_Stdin: STDIN goes to the task with that global id, ALLSTDIN
// to every task, a zero-length STDIN closes that task's stdin (later data
// for it is dropped, other tasks keep theirs), unknown tasks are ignored,
// and CONNECTION_TEST is answered with an empty CONNECTION_TEST.
func TestTaskIO_Stdin(t *testing.T) {
	x := newIOStep(t, nil)
	x.srun.send(t, stepio.TypeStdin, 5, []byte("to five"))
	if got, err := x.readStdin(1, ioWait); got != "to five" || err != nil {
		t.Fatalf("task 5 stdin: %q %v", got, err)
	}
	if got, err := x.readStdin(0, 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("task 4 got %q %v", got, err)
	}

	x.srun.send(t, stepio.TypeAllStdin, stepio.AllTasks, []byte("to all"))
	for i := range 2 {
		if got, err := x.readStdin(i, ioWait); got != "to all" || err != nil {
			t.Fatalf("task %d stdin: %q %v", i, got, err)
		}
	}

	x.srun.send(t, stepio.TypeConnectionTest, 0, nil)
	if f := x.srun.next(t); f.typ != stepio.TypeConnectionTest || f.gtid != 0 || f.ltid != 0 || len(f.data) != 0 {
		t.Fatalf("connection test answer %+v", f)
	}

	x.srun.send(t, stepio.TypeStdin, 4, nil) // EOF for task 4
	if got, err := x.readStdin(0, ioWait); got != "" || err != io.EOF {
		t.Fatalf("task 4 after stdin EOF: %q %v", got, err)
	}
	x.srun.send(t, stepio.TypeStdin, 4, []byte("late"))
	x.srun.send(t, stepio.TypeStdin, 9, []byte("nobody"))
	x.srun.send(t, stepio.TypeStdin, 5, []byte("still"))
	if got, err := x.readStdin(1, ioWait); got != "still" || err != nil {
		t.Fatalf("task 5 after task 4's EOF: %q %v", got, err)
	}

	// ALLSTDIN EOF closes every remaining stdin.
	x.srun.send(t, stepio.TypeAllStdin, stepio.AllTasks, nil)
	if got, err := x.readStdin(1, ioWait); got != "" || err != io.EOF {
		t.Fatalf("task 5 after ALLSTDIN EOF: %q %v", got, err)
	}
}

// TestTaskIO_OverlongFrame: a client frame longer than MAX_MSG_LEN drops
// that client; the tasks' output still ends cleanly.
func TestTaskIO_OverlongFrame(t *testing.T) {
	x := newIOStep(t, nil)
	h := stepio.Header{Type: stepio.TypeStdin, GTaskID: 4, Length: stepio.MaxMsgLen + 1}.Append(nil)
	if _, err := x.srun.conn.Write(h); err != nil {
		t.Fatal(err)
	}
	if fs := x.srun.rest(t); len(fs) != 0 {
		t.Errorf("frames before the drop: %+v", fs)
	}
	if got, err := x.readStdin(0, 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("task 4 got %q %v", got, err)
	}
	write(t, x.out(0), "nobody listens")
	x.endTasks()
	x.closeIO(t)
}

// TestTaskIO_Files: ofname/efname/ifname patterns (slurmstepd_job.c
// _expand_stdio_filename, io.c _init_task_stdio_fds): %t per task,
// relative to the cwd, opened by the stepd; a file-backed stream is not
// announced to srun (stdout_objs 0) and sends nothing; a stdin file feeds
// the task and srun's STDIN for it is dropped. The default open mode
// truncates (JobFileAppend=0); OPEN_MODE_APPEND appends.
func TestTaskIO_Files(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   uint8
		append bool // JobFileAppend
		want   string
	}{
		{"default truncates", 0, false, "new 4\n"},
		{"default with JobFileAppend", 0, true, "old\nnew 4\n"},
		{"append", slurmproto.OpenModeAppend, false, "old\nnew 4\n"},
		{"truncate", slurmproto.OpenModeTruncate, true, "new 4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cwd string
			x := newIOStep(t, func(s *Step) {
				cwd = s.cwd
				s.launch.OFName, s.launch.IFName, s.launch.OpenMode = "out-%t", "in.txt", tc.mode
				s.spec.JobFileAppend = tc.append
				if err := os.WriteFile(filepath.Join(cwd, "out-4"), []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(cwd, "in.txt"), []byte("from file"), 0o644); err != nil {
					t.Fatal(err)
				}
			})
			x.srun.checkInit(t, 1, 0, 2, x.key)
			if got, err := x.readStdin(0, ioWait); got != "from file" || err != nil {
				t.Fatalf("task 4 stdin: %q %v", got, err)
			}
			x.srun.send(t, stepio.TypeStdin, 4, []byte("dropped"))
			write(t, x.out(0), "new 4\n")
			write(t, x.out(1), "new 5\n")
			write(t, x.errOut(0), "err 4\n")
			x.endTasks()
			x.closeIO(t)
			data, eof, _ := streams(t, x.srun.rest(t))
			if len(data) != 1 || data[se4] != "err 4\n" || len(eof) != 2 || !eof[se4] || !eof[se5] {
				t.Errorf("srun got data %v, EOFs %v", data, eof)
			}
			for name, want := range map[string]string{"out-4": tc.want, "out-5": "new 5\n"} {
				if b, err := os.ReadFile(filepath.Join(cwd, name)); err != nil || string(b) != want {
					t.Errorf("%s: %q %v, want %q", name, b, err, want)
				}
			}
		})
	}
}

// TestTaskIO_SingleTaskPattern: an ofname that is just a task number
// means that task's stdout goes to srun and the others' to /dev/null.
func TestTaskIO_SingleTaskPattern(t *testing.T) {
	x := newIOStep(t, func(s *Step) { s.launch.OFName = "5" })
	x.srun.checkInit(t, 1, 1, 2, x.key)
	write(t, x.out(0), "to null\n")
	write(t, x.out(1), "to srun\n")
	x.endTasks()
	x.closeIO(t)
	data, eof, _ := streams(t, x.srun.rest(t))
	if len(data) != 1 || data[so5] != "to srun\n" || len(eof) != 3 || !eof[so5] {
		t.Errorf("srun got data %v, EOFs %v", data, eof)
	}
}

// TestTaskIO_LabelledFile: with --label and an output file, stock writes
// the output, labelled "<gtid>: ", into the file from the stepd; srun gets
// the EOFs only (mgr.c _setup_normal_io, io_create_local_client).
func TestTaskIO_LabelledFile(t *testing.T) {
	var cwd string
	x := newIOStep(t, func(s *Step) {
		cwd = s.cwd
		s.launch.Flags, s.launch.OFName = slurmproto.LaunchLabelIO, "out-%t"
	})
	write(t, x.out(0), "line\n")
	x.endTasks()
	x.closeIO(t)
	data, eof, _ := streams(t, x.srun.rest(t))
	b, _ := os.ReadFile(filepath.Join(cwd, "out-4"))
	if data[so4] != "" || !eof[so4] || string(b) != "4: line\n" {
		t.Errorf("srun data %v EOFs %v; file %q", data, eof, b)
	}
}

// TestTaskIO_PTY: with --pty task 0's three streams are one terminal:
// srun is told of one stdout and no stderr object, the terminal's output
// (with its line discipline) reaches srun as task 0's stdout and srun's
// STDIN reaches the task through the terminal; the other tasks get
// /dev/null.
func TestTaskIO_PTY(t *testing.T) {
	x := newIOStep(t, func(s *Step) {
		s.launch.Flags = slurmproto.LaunchPTY
		s.tasks = []*stepTask{{ltid: 0, gtid: 0}, {ltid: 1, gtid: 1}}
	})
	x.srun.checkInit(t, 1, 1, 0, x.key)
	if x.s.pty == nil || x.child[0][0] != x.child[0][1] || x.child[0][1] != x.child[0][2] {
		t.Fatalf("task 0 stdio %v, pty %v", x.child[0], x.s.pty)
	}
	for k, f := range x.child[1] {
		if f == nil || f.Name() != "/dev/null" {
			t.Errorf("task 1 stream %d: %v", k, f)
		}
	}
	write(t, x.out(0), "hi\n")
	var got string
	for !strings.Contains(got, "hi\r\n") {
		f := x.srun.nextData(t)
		if f.typ != stepio.TypeStdout || f.gtid != 0 {
			t.Fatalf("frame %+v", f)
		}
		got += string(f.data)
	}
	x.srun.send(t, stepio.TypeStdin, 0, []byte("typed\n"))
	if err := x.in(0).SetReadDeadline(time.Now().Add(ioWait)); err == nil {
		b := make([]byte, 64)
		n, err := x.in(0).Read(b)
		if string(b[:n]) != "typed\n" || err != nil {
			t.Errorf("terminal read %q %v", b[:n], err)
		}
	} else {
		t.Logf("no deadline on the terminal (%v): stdin not read back", err)
	}
	x.endTasks()
	x.closeIO(t)
	data, eof, _ := streams(t, x.srun.rest(t))
	if len(eof) != 1 || !eof[streamKey{stepio.TypeStdout, 0}] {
		t.Errorf("EOFs %v (data %v)", eof, data)
	}
}

// TestTaskIO_Attach: an sattach connection (Step's attach, as REQUEST_ATTACH
// does it) gets its own init message (its key, the same counts), the
// recent output first (stock replays its message cache), then live output
// and every EOF; its stdin reaches the tasks as srun's does; a connection
// test is answered on every connection.
func TestTaskIO_Attach(t *testing.T) {
	x := newIOStep(t, nil)
	write(t, x.out(0), "before\n")
	if f := x.srun.nextData(t); string(f.data) != "before\n" {
		t.Fatalf("srun got %q", f.data)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		defer close(accepted)
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(ioWait))
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	sattachKey := []byte("MUNGE:sattach:\x00")
	if err := x.s.sio.attach(x.s, ln.Addr().String(), sattachKey); err != nil {
		t.Fatalf("attach: %v", err)
	}
	c, ok := <-accepted
	if !ok {
		t.Fatal("no sattach connection")
	}
	sattach := newIOPeer(t, c, false)
	sattach.checkInit(t, 1, 2, 2, sattachKey)
	if f := sattach.nextData(t); f.typ != stepio.TypeStdout || f.gtid != 4 || string(f.data) != "before\n" {
		t.Errorf("sattach replay %+v %q", f, f.data)
	}

	sattach.send(t, stepio.TypeStdin, 4, []byte("from sattach"))
	if got, err := x.readStdin(0, ioWait); got != "from sattach" || err != nil {
		t.Fatalf("task 4 stdin %q %v", got, err)
	}
	sattach.send(t, stepio.TypeConnectionTest, 0, nil)
	for name, p := range map[string]*ioPeer{"srun": x.srun, "sattach": sattach} {
		if f := p.next(t); f.typ != stepio.TypeConnectionTest || len(f.data) != 0 {
			t.Errorf("%s: connection test answer %+v", name, f)
		}
	}

	write(t, x.out(0), "after\n")
	for name, p := range map[string]*ioPeer{"srun": x.srun, "sattach": sattach} {
		if f := p.nextData(t); f.typ != stepio.TypeStdout || f.gtid != 4 || string(f.data) != "after\n" {
			t.Errorf("%s got %+v %q", name, f, f.data)
		}
	}
	x.endTasks()
	x.closeIO(t)
	for name, p := range map[string]*ioPeer{"srun": x.srun, "sattach": sattach} {
		data, eof, _ := streams(t, p.rest(t))
		if len(data) != 0 || len(eof) != 4 {
			t.Errorf("%s: data %v after 'after', EOFs %v", name, data, eof)
		}
	}
}

// TestTaskIO_AttachRequest: REQUEST_ATTACH over the step socket with
// stepapi's client: refused with ESLURMD_JOB_NOTRUNNING before the step
// runs; then sattach's I/O port gets an init message with its key, its
// response address joins the MESSAGE_TASK_EXIT targets, and the reply lists
// the local tasks' pids, global ids and executables.
func TestTaskIO_AttachRequest(t *testing.T) {
	x := newIOStep(t, func(s *Step) {
		s.spec.SpoolDir = t.TempDir()
		s.spec.SlurmUserUID = 64030
		s.state = stepapi.StateStarting
		s.tasks[0].pid, s.tasks[0].argv0 = 1111, "/usr/bin/prog"
		s.tasks[1].pid = 1112 // no argv0: an empty name
	})
	if err := x.s.listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.s.closeSocket)
	ctx, cancel := context.WithTimeout(context.Background(), ioWait)
	defer cancel()
	conn, err := stepapi.Dial(ctx, x.s.sockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ioAddr := netip.MustParseAddrPort(ln.Addr().String())
	respAddr := netip.MustParseAddrPort("127.0.0.1:5555")
	key := []byte("MUNGE:sattach-req:\x00")

	r, err := conn.Attach(ctx, ioAddr, respAddr, key, 0)
	if err != nil || r.RC != slurmproto.ESlurmdJobNotRunning || r.PIDs != nil {
		t.Fatalf("not running: %+v, %v", r, err)
	}
	x.s.setState(stepapi.StateRunning)

	accepted := make(chan net.Conn, 1)
	go func() {
		defer close(accepted)
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(ioWait))
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	r, err = conn.Attach(ctx, ioAddr, respAddr, key, 0)
	if err != nil || r.RC != 0 {
		t.Fatalf("Attach: %+v, %v", r, err)
	}
	if !slices.Equal(r.PIDs, []uint32{1111, 1112}) || !slices.Equal(r.GTIDs, []uint32{4, 5}) ||
		!slices.Equal(r.Executables, []string{"/usr/bin/prog", ""}) {
		t.Errorf("reply %+v", r)
	}
	c, ok := <-accepted
	if !ok {
		t.Fatal("no I/O connection to sattach")
	}
	newIOPeer(t, c, false).checkInit(t, 1, 2, 2, key)
	if got := x.s.exitTargets(); !slices.Equal(got, []string{"127.0.0.1:5555"}) {
		t.Errorf("exit targets %q", got)
	}
}

// srun sends a resize as pty_winsz_t: columns, then rows. A 40-row, 120-column terminal
// must not become 120 rows of 40 columns.
func TestParseWinsz(t *testing.T) {
	ws := parseWinsz([4]byte{0, 120, 0, 40})
	if ws.Rows != 40 || ws.Cols != 120 {
		t.Fatalf("rows %d cols %d, want 40 and 120", ws.Rows, ws.Cols)
	}
}
