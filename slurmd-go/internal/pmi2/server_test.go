package pmi2

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// fakeTransport records what the server sends up and the kills.
type fakeTransport struct {
	mu     sync.Mutex
	aborts int
	up     [][]byte
	upCh   chan []byte
	fail   int // Up fails this many times first
	kills  int
	srun   func(msg []byte) ([]byte, error)
}

func newFake() *fakeTransport { return &fakeTransport{upCh: make(chan []byte, 16)} }

func (f *fakeTransport) Up(ctx context.Context, msg []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("parent unreachable")
	}
	b := append([]byte(nil), msg...)
	f.up = append(f.up, b)
	f.upCh <- b
	return nil
}

func (f *fakeTransport) ToSrun(ctx context.Context, msg []byte) ([]byte, error) {
	if f.srun == nil {
		return nil, errors.New("no srun")
	}
	return f.srun(msg)
}

func (f *fakeTransport) KillStep(abort bool) {
	f.mu.Lock()
	if abort {
		f.aborts++
	}
	f.kills++
	f.mu.Unlock()
}

func (f *fakeTransport) killCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kills
}

func testConfig() Config {
	return Config{
		JobID: 7, StepID: 0, NodeID: 0, NNodes: 1, NTasks: 2, ThisNode: "t1",
		GTIDs: []uint32{0, 1}, ProcMapping: "(vector,(0,1,2))",
		RetryDelays: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond},
		SendTimeout: 5 * time.Second,
	}
}

// client is a task's end of its PMI socket.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func startTask(t *testing.T, s *Server, lrank int) *client {
	t.Helper()
	a, b := socketpair(t)
	done := make(chan struct{})
	go func() { s.ServeTask(lrank, b); close(done) }()
	t.Cleanup(func() {
		a.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("ServeTask did not return after the task closed its end")
		}
	})
	return &client{t: t, c: a, r: bufio.NewReader(a)}
}

// socketpair is what the step manager gives each task: a unix stream
// pair (buffered, unlike net.Pipe).
func socketpair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pmi")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

func (c *client) write(s string) {
	c.t.Helper()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write([]byte(s)); err != nil {
		c.t.Fatalf("write %q: %v", s, err)
	}
}

func (c *client) line() string {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, l)
	}
	return l
}

// pmi2 reads one length-prefixed answer.
func (c *client) pmi2() string {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var lb [6]byte
	if _, err := io.ReadFull(c.r, lb[:]); err != nil {
		c.t.Fatalf("read length: %v", err)
	}
	b := make([]byte, atoi(string(lb[:])))
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	return string(lb[:]) + string(b)
}

func (c *client) exchange(req, want string) {
	c.t.Helper()
	c.write(req)
	if got := c.line(); got != want {
		c.t.Fatalf("%q:\n got %q\nwant %q", req, got, want)
	}
}

func (c *client) exchange2(req, want string) {
	c.t.Helper()
	c.write(frame(req))
	if got := c.pmi2(); got != want {
		c.t.Fatalf("%q:\n got %q\nwant %q", req, got, want)
	}
}

func frame(s string) string { return string(pmi2Frame(s)) }

func pairsOf(t *testing.T, kv ...string) []byte {
	t.Helper()
	p := slurmproto.NewPacker(64)
	for i := 0; i+1 < len(kv); i += 2 {
		packKV(p, kv[i], kv[i+1])
	}
	return p.Bytes()
}

// waitKills waits until the server cancelled the step n times (it answers
// the tasks first, as stock).
func waitKills(t *testing.T, f *fakeTransport, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.killCount() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := f.killCount(); got != n {
		t.Fatalf("%d kills, want %d", got, n)
	}
}

func recvUp(t *testing.T, f *fakeTransport) []byte {
	t.Helper()
	select {
	case b := <-f.upCh:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("nothing sent up")
		return nil
	}
}

// treeMsg frames a tree message as it arrives through slurmd: uid, len, data.
func treeMsg(uid uint32, data []byte) io.Reader {
	p := slurmproto.NewPacker(len(data) + 8)
	p.U32(uid)
	p.U32(uint32(len(data)))
	p.Raw(data)
	return bytes.NewReader(p.Bytes())
}

// TestPMI1_MPICH replays the exchange of MPICH 4.0.2's PMI-1 client with a
// first-level step manager, in the formats of stock's pmi1.c (the lines of
// a stock 22.05 node's debug3 log): init, maxes, appnum, kvsname, the
// process mapping, a fence with a put, a get of srun's merged pairs.
func TestPMI1_MPICH(t *testing.T) {
	f := newFake()
	s := NewServer(testConfig(), f, hclog.NewNullLogger())
	c0, c1 := startTask(t, s, 0), startTask(t, s, 1)
	for _, c := range []*client{c0, c1} {
		c.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
		c.exchange("cmd=get_maxes\n", "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n")
		c.exchange("cmd=get_appnum\n", "cmd=appnum rc=0 appnum=-1\n")
		c.exchange("cmd=get_universe_size\n", "cmd=universe_size rc=0 size=2\n")
		c.exchange("cmd=get_my_kvsname\n", "cmd=my_kvsname rc=0 kvsname=7.0\n")
		c.exchange("cmd=get kvsname=7.0 key=PMI_process_mapping\n", "cmd=get_result rc=0 value=(vector,(0,1,2))\n")
	}
	c0.exchange("cmd=put kvsname=7.0 key=-bcast-1-0 value=2F646576\n", "cmd=put_result rc=0\n")
	c0.write("cmd=barrier_in\n")
	c1.write("cmd=barrier_in\n")
	// Both tasks in: the fence goes to srun (node 0 "t1", 1 node, seq 1, the pair).
	up := recvUp(t, f)
	want := append(appendFenceHeader(0, "t1", 1, 1), pairsOf(t, "-bcast-1-0", "2F646576")...)
	if !bytes.Equal(up, want) {
		t.Fatalf("fence sent up:\n got %x\nwant %x", up, want)
	}
	s.HandleTree(treeMsg(0, FenceResp(1, [][2]string{{"-bcast-1-0", "2F646576"}, {"k", ""}})), true)
	for _, c := range []*client{c0, c1} {
		if got := c.line(); got != "cmd=barrier_out rc=0\n" {
			t.Fatalf("barrier: %q", got)
		}
	}
	c1.exchange("cmd=get kvsname=7.0 key=-bcast-1-0\n", "cmd=get_result rc=0 value=2F646576\n")
	c1.exchange("cmd=get kvsname=7.0 key=k\n", "cmd=get_result rc=0 value=\n")
	c1.exchange("cmd=get kvsname=7.0 key=none\n", "cmd=get_result rc=1\n")
	// The second fence carries seq 2; a repeated answer to the first is ignored.
	c0.write("cmd=barrier_in\n")
	c1.write("cmd=barrier_in\n")
	if up := recvUp(t, f); !bytes.Equal(up, appendFenceHeader(0, "t1", 1, 2)) {
		t.Fatalf("second fence %x", up)
	}
	s.HandleTree(treeMsg(0, FenceResp(1, nil)), true)
	s.HandleTree(treeMsg(0, FenceResp(2, nil)), true)
	for _, c := range []*client{c0, c1} {
		if got := c.line(); got != "cmd=barrier_out rc=0\n" {
			t.Fatalf("second barrier: %q", got)
		}
	}
	c0.exchange("cmd=finalize\n", "cmd=finalize_ack rc=0\n")
	if f.killCount() != 0 {
		t.Fatal("step killed")
	}
}

// TestPMI2_Exchange: the PMI-2 wire (pmi2.c): 6-character lengths,
// "cmd=...;" bodies.
func TestPMI2_Exchange(t *testing.T) {
	f := newFake()
	cfg := testConfig()
	cfg.GTIDs, cfg.NTasks, cfg.ResvPorts = []uint32{3}, 4, "12000-12001"
	s := NewServer(cfg, f, hclog.NewNullLogger())
	c := startTask(t, s, 0)
	c.exchange("cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	c.exchange2("cmd=fullinit;pmijobid=7.0;pmirank=3;threaded=FALSE;",
		frame("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=3;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;"))
	c.exchange2("cmd=job-getid;", frame("cmd=job-getid-response;rc=0;jobid=7.0;"))
	c.exchange2("cmd=info-getjobattr;key=PMI_process_mapping;", frame("cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2));"))
	c.exchange2("cmd=info-getjobattr;key=universeSize;", frame("cmd=info-getjobattr-response;rc=0;found=TRUE;value=4;"))
	c.exchange2("cmd=info-getjobattr;key=mpi_reserved_ports;", frame("cmd=info-getjobattr-response;rc=0;found=TRUE;value=12000-12001;"))
	c.exchange2("cmd=info-getjobattr;key=AAA;", frame("cmd=info-getjobattr-response;rc=0;found=FALSE;"))
	c.exchange2("cmd=info-putnodeattr;key=shm;value=seg1;", frame("cmd=info-putnodeattr-response;rc=0;"))
	c.exchange2("cmd=info-getnodeattr;key=shm;wait=FALSE;", frame("cmd=info-getnodeattr-response;rc=0;found=TRUE;value=seg1;"))
	c.exchange2("cmd=info-getnodeattr;key=other;wait=FALSE;", frame("cmd=info-getnodeattr-response;rc=0;found=FALSE;"))
	c.exchange2("cmd=kvs-put;key=card-3;value=tcp://h:1;", frame("cmd=kvs-put-response;rc=0;"))
	c.write(frame("cmd=kvs-fence;"))
	up := recvUp(t, f)
	if want := append(appendFenceHeader(0, "t1", 1, 1), pairsOf(t, "card-3", "tcp://h:1")...); !bytes.Equal(up, want) {
		t.Fatalf("fence:\n got %x\nwant %x", up, want)
	}
	s.HandleTree(treeMsg(1001, FenceResp(1, [][2]string{{"card-0", "tcp://g:2"}})), true)
	if got := c.pmi2(); got != frame("cmd=kvs-fence-response;rc=0;") {
		t.Fatalf("fence response %q", got)
	}
	c.exchange2("cmd=kvs-get;jobid=7.0;srcid=-1;key=card-0;", frame("cmd=kvs-get-response;rc=0;found=TRUE;value=tcp://g:2;"))
	c.exchange2("cmd=kvs-get;jobid=7.0;srcid=-1;key=nope;", frame("cmd=kvs-get-response;rc=0;found=FALSE;"))
	c.exchange2("cmd=spawn;ncmds=1;", frame("cmd=spawn-response;rc=14;errmsg=not_supported_by_slurmd-go;"))
	c.exchange2("cmd=finalize;", frame("cmd=finalize-response;rc=0;"))
}

// TestPMI2_WaitedNodeAttr: info-getnodeattr with wait=TRUE is answered by
// the put that sets the key.
func TestPMI2_WaitedNodeAttr(t *testing.T) {
	cfg := testConfig()
	s := NewServer(cfg, newFake(), hclog.NewNullLogger())
	c0, c1 := startTask(t, s, 0), startTask(t, s, 1)
	for _, c := range []*client{c0, c1} {
		c.exchange("cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	}
	c1.write(frame("cmd=info-getnodeattr;key=seg;wait=TRUE;"))
	c0.exchange2("cmd=info-putnodeattr;key=seg;value=v;", frame("cmd=info-putnodeattr-response;rc=0;"))
	if got := c1.pmi2(); got != frame("cmd=info-getnodeattr-response;rc=0;found=TRUE;value=v;") {
		t.Fatalf("waited get: %q", got)
	}
}

// TestFence_Children: node 0 with two step managers below it (srun -N4
// with TreeWidth=2: t2 and t3 report to t1) sends up once its task and
// both children are in, with their pairs; a duplicate, a stale seq and a
// node outside the step are ignored.
func TestFence_Children(t *testing.T) {
	f := newFake()
	cfg := testConfig()
	cfg.NNodes, cfg.NTasks, cfg.NumChildren, cfg.GTIDs = 4, 4, 2, []uint32{0}
	s := NewServer(cfg, f, hclog.NewNullLogger())
	c := startTask(t, s, 0)
	c.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	child := func(node uint32, name string, seq uint32, kv ...string) []byte {
		b := appendFenceHeader(node, name, 1, seq)
		return append(b, pairsOf(t, kv...)...)
	}
	s.HandleTree(treeMsg(0, child(1, "t2", 1, "a", "1")), true)
	s.HandleTree(treeMsg(0, child(1, "t2", 1, "a", "1")), true)            // duplicate
	s.HandleTree(treeMsg(0, child(2, "t3", 5, "x", "9")), true)            // wrong seq
	s.HandleTree(treeMsg(0, child(9, "t9", 1, "y", "9")), true)            // no such node
	s.HandleTree(bytes.NewReader([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0}), true) // truncated
	c.exchange("cmd=put kvsname=7.0 key=b value=2\n", "cmd=put_result rc=0\n")
	c.write("cmd=barrier_in\n")
	s.HandleTree(treeMsg(0, child(2, "t3", 1, "c", "3")), true)
	up := recvUp(t, f)
	want := appendFenceHeader(0, "t1", 3, 1)
	want = append(want, pairsOf(t, "a", "1")...)
	want = append(want, pairsOf(t, "b", "2")...)
	want = append(want, pairsOf(t, "c", "3")...)
	if !bytes.Equal(up, want) {
		t.Fatalf("fence up:\n got %x\nwant %x", up, want)
	}
	f.mu.Lock()
	n := len(f.up)
	f.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d fences sent up", n)
	}
}

// TestFence_ParentUnreachable: the fence cannot go up after 5 tries: the
// tasks get barrier_out with the error and the step is cancelled, as
// stock's temp_kvs_send failure.
func TestFence_ParentUnreachable(t *testing.T) {
	f := newFake()
	f.fail = 5
	cfg := testConfig()
	cfg.GTIDs, cfg.Parent = []uint32{0}, "t1"
	s := NewServer(cfg, f, hclog.NewNullLogger())
	c := startTask(t, s, 0)
	c.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	c.exchange("cmd=barrier_in\n", "cmd=barrier_out rc=-1 msg=mpi/pmi2:_failed_to_send_temp_kvs\n")
	waitKills(t, f, 1)
	// Four failures then success: the fifth try gets through.
	f2 := newFake()
	f2.fail = 4
	s2 := NewServer(cfg, f2, hclog.NewNullLogger())
	c2 := startTask(t, s2, 0)
	c2.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	c2.write("cmd=barrier_in\n")
	recvUp(t, f2)
	if f2.killCount() != 0 {
		t.Fatal("killed after a successful retry")
	}
}

// TestFenceResp_BadSeq: srun's answer with an unexpected seq fails the
// fence (rc -1, errmsg) and cancels the step.
func TestFenceResp_BadSeq(t *testing.T) {
	f := newFake()
	cfg := testConfig()
	cfg.GTIDs = []uint32{0}
	s := NewServer(cfg, f, hclog.NewNullLogger())
	c := startTask(t, s, 0)
	c.exchange("cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	c.write(frame("cmd=kvs-fence;"))
	recvUp(t, f)
	s.HandleTree(treeMsg(0, FenceResp(7, nil)), true)
	if got := c.pmi2(); got != frame("cmd=kvs-fence-response;rc=-1;errmsg=mpi/pmi2: invalid kvs seq from srun;") {
		t.Fatalf("got %q", got)
	}
	waitKills(t, f, 1)
}

// TestBadInput: lines that do not parse get an error answer and the
// connection goes on; no input panics the server.
func TestBadInput(t *testing.T) {
	f := newFake()
	s := NewServer(testConfig(), f, hclog.NewNullLogger())
	c := startTask(t, s, 0)
	c.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	c.exchange("hello\n", "cmd=error rc=-1 msg=invalid_request\n")
	c.exchange("cmd=frobnicate\n", "cmd=error rc=-1 msg=invalid_command\n")
	// As stock, pairs that do not parse leave the command to run without
	// them: a put without key adds nothing.
	c.exchange("cmd=put key\n", "cmd=put_result rc=0\n")
	c.exchange("cmd=getbyidx kvsname=7.0 idx=0\n", "cmd=getbyidx rc=-1 msg=not_supported_by_slurmd-go\n")
	c.write("mcmd=spawn\nexecname=a\nendcmd\n")
	if got := c.line(); got != "cmd=spawn_result rc=-1 errmsg=not_supported_by_slurmd-go\n" {
		t.Fatalf("spawn: %q", got)
	}
	c.exchange("cmd=get_appnum\n", "cmd=appnum rc=0 appnum=-1\n")
	// MPICH 4.2's MPI_Abort: a free-text message among the pairs; the step
	// is cancelled, nothing answered.
	c.write("cmd=abort exitcode=3 error_msg=application called MPI_Abort(MPI_COMM_WORLD, 3) - process 2\n")
	waitKills(t, f, 1)
	f.mu.Lock()
	aborts := f.aborts
	f.mu.Unlock()
	if aborts != 1 {
		t.Fatalf("%d aborts", aborts)
	}

	// A line longer than any request ends the connection.
	c2 := startTask(t, s, 1)
	c2.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	go func() { _, _ = c2.c.Write([]byte(strings.Repeat("x", 2*maxLine))) }()
	_ = c2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.r.ReadByte(); err == nil {
		t.Fatal("an overlong line got an answer")
	}

	// A second client asking for another version is refused.
	s3 := NewServer(testConfig(), newFake(), hclog.NewNullLogger())
	a, b := startTask(t, s3, 0), startTask(t, s3, 1)
	a.exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	b.exchange("cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1\n")
	c3 := startTask(t, NewServer(testConfig(), newFake(), hclog.NewNullLogger()), 0)
	c3.exchange("junk\n", "cmd=response_to_init rc=1 pmi_version=2 pmi_subversion=0\n")

	// PMI-2: a zero length is answered with finalize-response.
	s4 := NewServer(testConfig(), newFake(), hclog.NewNullLogger())
	d := startTask(t, s4, 0)
	d.exchange("cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	d.exchange2("nocmd;", frame("cmd=error-response;rc=-1;errmsg=invalid request;"))
	d.exchange2("cmd=what;", frame("cmd=what-response;rc=-1;errmsg=invalid command;"))
	d.write("000000")
	if got := d.pmi2(); got != frame("cmd=finalize-response;rc=0;") {
		t.Fatalf("zero length: %q", got)
	}

	// Tree messages that do not parse.
	for _, m := range [][]byte{nil, {0, 0, 0, 1}, {0, 0, 0, 5, 0, 0, 0, 2, 0, 9}, {0, 0, 0, 5, 0, 0, 0, 2, 0, 1}, {0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff}} {
		s.HandleTree(bytes.NewReader(m), true)
	}
}

// TestStepdParent: the tree of srun -N4 with TreeWidth=2 as stock built
// it (golden forward-data frames: t2 and t3 send their fence to t1, t1 and
// t4 to srun); a width above the node count makes every node srun's child.
func TestStepdParent(t *testing.T) {
	want := [][2]int{{-1, 2}, {0, 0}, {0, 0}, {-1, 0}}
	for n, w := range want {
		p, c := StepdParent(n, 4, 2)
		if p != w[0] || c != w[1] {
			t.Errorf("node %d: parent %d children %d, want %v", n, p, c, w)
		}
	}
	for n := 0; n < 4; n++ {
		if p, c := StepdParent(n, 4, 50); p != -1 || c != 0 {
			t.Errorf("width 50 node %d: parent %d children %d", n, p, c)
		}
	}
	// 16 nodes, width 3: a node's count is every node below it.
	parents := make([]int, 16)
	for n := range parents {
		p, _ := StepdParent(n, 16, 3)
		if p < -1 || p >= n {
			t.Fatalf("node %d: parent %d", n, p)
		}
		parents[n] = p
	}
	for n := range parents {
		below := 0
		for m := range parents {
			for p := parents[m]; p >= 0; p = parents[p] {
				if p == n {
					below++
				}
			}
		}
		if _, c := StepdParent(n, 16, 3); c != below {
			t.Errorf("node %d: %d children, %d below it", n, c, below)
		}
	}
}

func TestParseRequest(t *testing.T) {
	r, err := parseRequest("cmd=put kvsname=1.0 key=k value=a=b\n", false)
	if err != nil || r.cmd != "put" || len(r.pairs) != 3 || r.pairs[2] != [2]string{"value", "a=b"} {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = parseRequest("cmd=kvs-get;jobid=1.0;srcid=-1;key=k;", true)
	if err != nil || r.cmd != "kvs-get" || len(r.pairs) != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "cmd=", "cmd=get", "xcmd=get;"} {
		if _, err := parseRequest(bad, true); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if atoi(" 12x") != 12 || atoi("-3") != -3 || atoi("abc") != 0 {
		t.Fatal("atoi")
	}
}
