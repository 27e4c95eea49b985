package pmi2

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Transport is how the server reaches the rest of the step.
type Transport interface {
	// Up sends one tree message to this node's parent: the parent step
	// manager (REQUEST_FORWARD_DATA), or srun for a first-level node.
	Up(ctx context.Context, msg []byte) error
	// ToSrun sends one tree message to srun and returns its answer (the
	// name service: tree_msg_to_srun_with_resp).
	ToSrun(ctx context.Context, msg []byte) ([]byte, error)
	// KillStep cancels the step on every node (slurm_kill_job_step):
	// abort is a task's PMI abort (26.05 sends SIG_TERM_KILL for it), else
	// a fence that failed (SIGKILL).
	KillStep(abort bool)
}

// Config is the step as the server needs it (setup.c job_info, tree_info).
type Config struct {
	JobID, StepID uint32 // the KVS name "<job>.<step>" (the het job id for a het step)
	PMIJobID      string // PMI_JOBID: SLURM_PMI2_PMI_JOBID, else "<job>.<step>"
	NodeID        uint32 // this node's index in the step
	NNodes        uint32
	NTasks        uint32
	ThisNode      string   // this node's name in the step's node list
	Parent        string   // the parent node's name; "" for srun
	NumChildren   int      // step managers below this one in the tree
	GTIDs         []uint32 // the ranks of the local tasks, by local id
	ProcMapping   string   // PMI_process_mapping
	Preput        [][2]string
	SpawnerJobID  string
	Debugged      bool   // PMI_DEBUG
	ResvPorts     string // SLURM_STEP_RESV_PORTS
	NoDupKeys     bool   // SLURM_PMI_KVS_NO_DUP_KEYS
	Hostname      string // for the netinfo job attribute
	NetInfo       func() string
	// RetryDelays are the waits between the tries of a fence's send up
	// (temp_kvs_send: 5 tries, 1, 2, 4, 8 s); nil means those.
	RetryDelays []time.Duration
	// SendTimeout bounds one try.
	SendTimeout time.Duration
}

// Timeouts of the server.
const (
	// DefaultSendTimeout bounds one try of a message up the tree or to srun.
	DefaultSendTimeout = 30 * time.Second
	// TaskWriteTimeout bounds one answer to a task.
	TaskWriteTimeout = 30 * time.Second
	// maxPMI2Request bounds a PMI-2 request (a spawn carries argv and info).
	maxPMI2Request = 1 << 20
)

var defaultRetryDelays = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// Server is one step manager's PMI server. Its methods are safe for
// concurrent use: each task and each tree connection has its goroutine.
type Server struct {
	cfg Config
	tr  Transport
	log hclog.Logger

	mu sync.Mutex // guards everything below; held across a fence's send up, as stock's single agent thread
	// version and subversion are the PMI version of the step's tasks,
	// fixed by the first init (client.c pmi_version).
	version, subversion int
	kvs                 map[string]string
	temp                []byte // temp_kvs_buf: the fence message being built
	seq                 uint32 // kvs_seq
	tasksToWait         int
	childrenToWait      int
	waitingResp         bool
	childSeq            []uint32 // children_kvs_seq, by node id
	tasks               map[int]*taskConn
	nodeAttr            map[string]string
	pendingAttr         []pendingAttr
}

type taskConn struct {
	mu        sync.Mutex
	w         io.WriteCloser
	finalized bool
}

func (t *taskConn) send(b []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finalized {
		return nil
	}
	if d, ok := t.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		// A task that does not read must not hold the server.
		_ = d.SetWriteDeadline(time.Now().Add(TaskWriteTimeout))
	}
	_, err := t.w.Write(b)
	return err
}

type pendingAttr struct {
	lrank int
	key   string
}

// NewServer builds the server of a step; its KVS holds the preput pairs
// and PMI_process_mapping (setup.c _setup_stepd_kvs).
func NewServer(cfg Config, tr Transport, log hclog.Logger) *Server {
	if cfg.RetryDelays == nil {
		cfg.RetryDelays = defaultRetryDelays
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.PMIJobID == "" {
		cfg.PMIJobID = fmt.Sprintf("%d.%d", cfg.JobID, cfg.StepID)
	}
	s := &Server{
		cfg: cfg, tr: tr, log: log,
		kvs: map[string]string{}, seq: 1,
		childSeq: make([]uint32, cfg.NNodes),
		tasks:    map[int]*taskConn{}, nodeAttr: map[string]string{},
	}
	for _, kv := range cfg.Preput {
		s.kvsPut(kv[0], kv[1])
	}
	s.kvsPut("PMI_process_mapping", cfg.ProcMapping)
	s.tempInit()
	return s
}

// tempInit is temp_kvs_init: a fresh fence message for the current seq.
// Caller holds mu (or owns s).
func (s *Server) tempInit() {
	s.temp = appendFenceHeader(s.cfg.NodeID, s.cfg.ThisNode, uint32(s.cfg.NumChildren)+1, s.seq)
	s.tasksToWait, s.childrenToWait = 0, 0
}

func (s *Server) tempAdd(k, v string) {
	p := slurmproto.NewPacker(len(k) + len(v) + 10)
	packKV(p, k, v)
	s.temp = append(s.temp, p.Bytes()...)
}

// kvsPut is kvs_put: a key put again replaces its value, unless
// SLURM_PMI_KVS_NO_DUP_KEYS (then stock appends and get finds the first).
func (s *Server) kvsPut(k, v string) {
	if _, dup := s.kvs[k]; dup && s.cfg.NoDupKeys {
		return
	}
	s.kvs[k] = v
}

// ServeTask serves local task lrank's end of its PMI socketpair until the
// task finalizes or closes it.
func (s *Server) ServeTask(lrank int, conn io.ReadWriteCloser) {
	tc := &taskConn{w: conn}
	s.mu.Lock()
	s.tasks[lrank] = tc
	s.mu.Unlock()
	defer func() {
		tc.mu.Lock()
		tc.finalized = true
		tc.mu.Unlock()
		conn.Close()
	}()
	if lrank < 0 || lrank >= len(s.cfg.GTIDs) {
		s.log.Error("mpi/pmi2: task of unknown local rank", "lrank", lrank)
		return
	}
	r := bufio.NewReaderSize(conn, maxLine)
	line, err := readLine(r)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.log.Error("mpi/pmi2: failed to read PMI1 init command", "lrank", lrank, "error", err)
		}
		return
	}
	if !s.handleInit(tc, line) {
		return
	}
	s.mu.Lock()
	pmi2 := s.version == pmi20Version
	s.mu.Unlock()
	for {
		var buf string
		if pmi2 {
			buf, err = readPMI2(r)
		} else {
			buf, err = readLine(r)
			if err == nil && strings.HasPrefix(buf, "mcmd=") {
				buf, err = readMcmd(r, buf)
			}
		}
		if err != nil {
			if errors.Is(err, errEmptyPMI2) {
				// handle_pmi2_cmd: a zero length is most likely a second
				// init; finalize-response makes the client give up.
				_ = tc.send(pmi2Frame("cmd=finalize-response;rc=0;"))
				return
			}
			if !errors.Is(err, io.EOF) {
				s.log.Error("mpi/pmi2: failed to read request", "lrank", lrank, "error", err)
			}
			return
		}
		if s.log.IsTrace() {
			s.log.Trace("mpi/pmi2: got client request: " + strings.TrimRight(buf, "\n"))
		}
		var done bool
		if pmi2 {
			done = s.handlePMI2(tc, lrank, buf)
		} else {
			done = s.handlePMI1(tc, lrank, buf)
		}
		if done {
			return
		}
	}
}

var errEmptyPMI2 = errors.New("pmi2: zero-length PMI-2 request")

func readLine(r *bufio.Reader) (string, error) {
	b, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("%w: line longer than %d bytes", ErrBadRequest, maxLine)
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// readMcmd reads a PMI-1 multi-line command up to its "endcmd" line.
func readMcmd(r *bufio.Reader, first string) (string, error) {
	var b strings.Builder
	b.WriteString(first)
	for first != "endcmd\n" && !strings.HasSuffix(b.String(), "endcmd\n") {
		l, err := readLine(r)
		if err != nil {
			return "", err
		}
		if b.Len()+len(l) > maxPMI2Request {
			return "", fmt.Errorf("%w: mcmd longer than %d bytes", ErrBadRequest, maxPMI2Request)
		}
		b.WriteString(l)
		first = l
	}
	return b.String(), nil
}

func readPMI2(r *bufio.Reader) (string, error) {
	var lb [6]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return "", err
	}
	n := atoi(string(lb[:]))
	if n <= 0 {
		return "", errEmptyPMI2
	}
	if n > maxPMI2Request {
		return "", fmt.Errorf("%w: PMI-2 request of %d bytes", ErrBadRequest, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// handleInit answers the PMI-1 init every client sends first; false when
// the connection cannot go on.
func (s *Server) handleInit(tc *taskConn, line string) bool {
	v, sv, ok := parseInit(line)
	rc := 0
	if !ok {
		s.log.Error(fmt.Sprintf("mpi/pmi2: invalid PMI1 init command: `%s'", strings.TrimRight(line, "\n")))
		rc, v, sv = 1, pmi20Version, pmi20Subversion
	} else {
		s.mu.Lock()
		if err := s.setVersion(v, sv); err != nil {
			s.log.Error(err.Error())
			rc = -1
			if s.version != 0 {
				v, sv = s.version, s.subversion
			}
		}
		s.mu.Unlock()
	}
	resp := fmt.Sprintf("cmd=response_to_init rc=%d pmi_version=%d pmi_subversion=%d\n", rc, v, sv)
	if err := tc.send([]byte(resp)); err != nil {
		s.log.Error("mpi/pmi2: failed to write PMI1 init response", "error", err)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version != 0 && rc == 0
}

// setVersion is set_pmi_version. Caller holds mu.
func (s *Server) setVersion(v, sv int) error {
	if !(v == pmi11Version && sv == pmi11Subversion) && !(v == pmi20Version && sv == pmi20Subversion) {
		return fmt.Errorf("mpi/pmi2: unsupported PMI version: %d.%d", v, sv)
	}
	if s.version != 0 && (s.version != v || s.subversion != sv) {
		return fmt.Errorf("mpi/pmi2: inconsistent client PMI version: %d.%d(req) <> %d.%d(orig)", v, sv, s.version, s.subversion)
	}
	if s.version == 0 {
		s.log.Debug(fmt.Sprintf("mpi/pmi2: got client PMI1 init, version=%d.%d", v, sv))
		s.version, s.subversion = v, sv
	}
	return nil
}

// fenceIn counts one local task into the fence (barrier_in, kvs-fence)
// and sends the fence up once every task and child is in. Caller holds mu.
func (s *Server) fenceIn() {
	if s.tasksToWait == 0 && s.childrenToWait == 0 {
		s.tasksToWait, s.childrenToWait = len(s.cfg.GTIDs), s.cfg.NumChildren
	}
	s.tasksToWait--
	s.maybeSendUp()
}

// maybeSendUp is the end of every fence handler. Caller holds mu.
func (s *Server) maybeSendUp() {
	if s.tasksToWait != 0 || s.childrenToWait != 0 {
		return
	}
	if err := s.sendUp(); err != nil {
		to := s.cfg.Parent
		if to == "" {
			to = "srun"
		}
		s.log.Error(fmt.Sprintf("mpi/pmi2: failed to send temp kvs to %s", to), "error", err)
		s.fenceRespToClients(-1, "mpi/pmi2: failed to send temp kvs")
		// Cancel the step so that its tasks do not hang.
		s.tr.KillStep(false)
		return
	}
	s.waitingResp = true
}

// sendUp is temp_kvs_send: the fence message goes up, tried 5 times.
// Caller holds mu.
func (s *Server) sendUp() error {
	msg := s.temp
	s.seq++ // expecting the new KVS from now on
	defer s.tempInit()
	var err error
	for try := 0; ; try++ {
		if try == 1 {
			s.log.Debug(fmt.Sprintf("failed to send temp kvs, rc=%d, retrying", -1), "error", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SendTimeout)
		err = s.tr.Up(ctx, msg)
		cancel()
		if err == nil || try >= len(s.cfg.RetryDelays) {
			return err
		}
		// The parent step manager or srun may not be ready yet.
		time.Sleep(s.cfg.RetryDelays[try])
	}
}

// fenceRespToClients is send_kvs_fence_resp_to_clients: barrier_out or
// kvs-fence-response to every local task. Caller holds mu.
func (s *Server) fenceRespToClients(rc int, errmsg string) {
	var b []byte
	switch s.version {
	case pmi11Version:
		if rc != 0 && errmsg != "" {
			b = []byte(fmt.Sprintf("cmd=barrier_out rc=%d msg=%s\n", rc, strings.ReplaceAll(errmsg, " ", "_")))
		} else {
			b = []byte(fmt.Sprintf("cmd=barrier_out rc=%d\n", rc))
		}
	case pmi20Version:
		if rc != 0 && errmsg != "" {
			b = pmi2Frame(fmt.Sprintf("cmd=kvs-fence-response;rc=%d;errmsg=%s;", rc, strings.ReplaceAll(errmsg, ";", "_")))
		} else {
			b = pmi2Frame(fmt.Sprintf("cmd=kvs-fence-response;rc=%d;", rc))
		}
	default:
		return // no task initialized: nobody to answer
	}
	for lrank, tc := range s.tasks {
		if err := tc.send(b); err != nil {
			s.log.Debug("mpi/pmi2: fence response to a task failed", "lrank", lrank, "error", err)
		}
	}
}

// HandleTree serves one tree message (handle_tree_cmd); fromSlurmd tells
// whether r starts with the uid REQUEST_FORWARD_DATA put there.
func (s *Server) HandleTree(r io.Reader, fromSlurmd bool) {
	uid, cmd, body, err := ReadTreeMsg(r, fromSlurmd)
	if err != nil {
		s.log.Error("mpi/pmi2: invalid tree request", "error", err)
		return
	}
	s.log.Trace(fmt.Sprintf("mpi/pmi2: got tree cmd: %d(%s)", cmd, TreeCmdName(cmd)), "uid", uid)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch cmd {
	case TreeKVSFence:
		s.treeFence(body)
	case TreeKVSFenceResp:
		s.treeFenceResp(body)
	default:
		// Spawn, ring and the name service's answers: this node never asks
		// for them (its tasks get an error instead).
		s.log.Error(fmt.Sprintf("mpi/pmi2: %s not supported by slurmd-go", TreeCmdName(cmd)))
	}
}

// treeFence is _handle_kvs_fence. Caller holds mu.
func (s *Server) treeFence(body []byte) {
	f, err := ParseFence(body)
	if err != nil {
		s.log.Error("mpi/pmi2: failed to unpack kvs fence message", "error", err)
		return
	}
	s.log.Trace(fmt.Sprintf("mpi/pmi2: in _handle_kvs_fence, from node %d(%s) representing %d offspring, seq=%d",
		f.FromNodeID, f.FromNode, f.NumChildren, f.Seq))
	if f.Seq != s.seq {
		s.log.Error(fmt.Sprintf("mpi/pmi2: invalid kvs seq from node %d(%s) ignored, expect %d got %d",
			f.FromNodeID, f.FromNode, s.seq, f.Seq))
		return
	}
	if int(f.FromNodeID) >= len(s.childSeq) {
		s.log.Error(fmt.Sprintf("mpi/pmi2: kvs fence from node %d(%s) outside the step's %d nodes ignored",
			f.FromNodeID, f.FromNode, len(s.childSeq)))
		return
	}
	if f.Seq == s.childSeq[f.FromNodeID] {
		s.log.Info(fmt.Sprintf("mpi/pmi2: duplicate KVS_FENCE request from node %d(%s) ignored, seq=%d",
			f.FromNodeID, f.FromNode, f.Seq))
		return
	}
	s.childSeq[f.FromNodeID] = f.Seq
	if s.tasksToWait == 0 && s.childrenToWait == 0 {
		s.tasksToWait, s.childrenToWait = len(s.cfg.GTIDs), s.cfg.NumChildren
	}
	s.childrenToWait -= int(f.NumChildren)
	s.temp = append(s.temp, f.Pairs...)
	s.maybeSendUp()
	s.log.Trace(fmt.Sprintf("mpi/pmi2: out _handle_kvs_fence, tasks_to_wait=%d, children_to_wait=%d",
		s.tasksToWait, s.childrenToWait))
}

// treeFenceResp is _handle_kvs_fence_resp: srun's merged KVS. Caller
// holds mu.
func (s *Server) treeFenceResp(body []byte) {
	u := slurmproto.NewUnpacker(body)
	seq, err := u.U32()
	if err != nil {
		s.log.Error("mpi/pmi2: unpack kvs error in fence resp", "error", err)
		s.fenceRespToClients(-1, "mpi/pmi2: unpack kvs error in fence resp")
		s.tr.KillStep(false)
		return
	}
	switch {
	case seq == s.seq-2:
		s.log.Debug(fmt.Sprintf("mpi/pmi2: duplicate KVS_FENCE_RESP seq %d kvs_seq %d from srun ignored", seq, s.seq))
		return
	case seq != s.seq-1:
		s.log.Error(fmt.Sprintf("mpi/pmi2: invalid kvs seq from srun, expect %d got %d", s.seq-1, seq))
		s.fenceRespToClients(-1, "mpi/pmi2: invalid kvs seq from srun")
		s.tr.KillStep(false)
		return
	}
	if !s.waitingResp {
		s.log.Debug("mpi/pmi2: duplicate KVS_FENCE_RESP from srun ignored")
		return
	}
	s.waitingResp = false
	pairs, err := parsePairs(body[u.Offset():])
	for _, kv := range pairs {
		s.kvsPut(kv[0], kv[1])
	}
	if err != nil {
		s.log.Error("mpi/pmi2: unpack kvs error in fence resp", "error", err)
		s.fenceRespToClients(-1, "mpi/pmi2: unpack kvs error in fence resp")
		s.tr.KillStep(false)
		return
	}
	s.fenceRespToClients(0, "")
}

// nameUp asks srun's name service (nameserv.c name_*_up).
func (s *Server) nameUp(cmd uint16, args ...string) ([]byte, error) {
	p := slurmproto.NewPacker(64)
	p.U16(cmd)
	for _, a := range args {
		p.Str(a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SendTimeout)
	defer cancel()
	return s.tr.ToSrun(ctx, p.Bytes())
}

func (s *Server) namePublish(name, port string) int {
	resp, err := s.nameUp(TreeNamePublish, name, port)
	return nameRC(resp, err)
}

func (s *Server) nameUnpublish(name string) int {
	resp, err := s.nameUp(TreeNameUnpub, name)
	return nameRC(resp, err)
}

func nameRC(resp []byte, err error) int {
	if err != nil {
		return -1
	}
	rc, err := slurmproto.NewUnpacker(resp).U32()
	if err != nil {
		return -1
	}
	return int(int32(rc))
}

// nameLookup returns the port published for name, "" if none.
func (s *Server) nameLookup(name string) string {
	resp, err := s.nameUp(TreeNameLookup, name)
	if err != nil {
		return ""
	}
	port, err := slurmproto.NewUnpacker(resp).Str()
	if err != nil {
		return ""
	}
	return goStr(port)
}

// PMIJobID is the PMI job id the tasks get as PMI_JOBID.
func (s *Server) PMIJobID() string { return s.cfg.PMIJobID }
