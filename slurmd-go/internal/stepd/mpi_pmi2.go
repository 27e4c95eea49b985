package stepd

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
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fwddata"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/pmi2"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/cparse"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// mpi/pmi2 in the step manager (stock: mpi_pmi2.c, setup.c, agent.c): the
// environment srun set, the tree socket, one socketpair per task, and
// internal/pmi2's server on them.

func init() { RegisterMPIHost(slurmproto.MPIPluginPMI2, newPMI2Host) }

// The environment srun's mpi/pmi2 sets for the step (pmi.h).
const (
	envPMI2SrunPort    = "SLURM_PMI2_SRUN_PORT"
	envPMI2StepNodes   = "SLURM_PMI2_STEP_NODES"
	envPMI2TreeWidth   = "SLURM_PMI2_TREE_WIDTH"
	envPMI2ProcMapping = "SLURM_PMI2_PROC_MAPPING"
	envPMI2PMIJobID    = "SLURM_PMI2_PMI_JOBID"
	envPMI2SpawnSeq    = "SLURM_PMI2_SPAWN_SEQ"
	envPMI2SpawnerJob  = "SLURM_PMI2_SPAWNER_JOBID"
	envPMI2PreputCount = "SLURM_PMI2_PREPUT_COUNT"
	envPMI2PPKey       = "SLURM_PMI2_PPKEY"
	envPMI2PPVal       = "SLURM_PMI2_PPVAL"
	envStepResvPorts   = "SLURM_STEP_RESV_PORTS"
	envPMIDebug        = "PMI_DEBUG"
	envKVSNoDupKeys    = "SLURM_PMI_KVS_NO_DUP_KEYS"
)

// PMI2TreeReadTimeout bounds reading one tree message once connected: the
// sender (slurmd, srun) writes it at once.
const PMI2TreeReadTimeout = 30 * time.Second

type pmi2Host struct {
	st  *MPIStep
	log hclog.Logger

	jobID, stepID  uint32
	nnodes, nodeID uint32
	ntasks         uint32
	gtids          []uint32
	spawned        bool
	pmiJobID       string

	parent   string // "" for srun
	srunAddr string // host:port of srun's PMI2 listener
	rawAddr  string // the tree socket with SlurmdSpoolDir unexpanded: each slurmd expands it
	sockPath string
	resolve  fwddata.Resolver

	ln        net.Listener
	stepdEnds []net.Conn
	taskEnds  []*os.File
	srv       *pmi2.Server
}

func newPMI2Host(st *MPIStep) (MPIHost, error) {
	return &pmi2Host{st: st, log: st.Log}, nil
}

// Prefork is mpi_p_slurmstepd_prefork: pmi2_setup_stepd, then the agent.
func (h *pmi2Host) Prefork(ctx context.Context, env *Env) error {
	h.log.Debug("mpi/pmi2: using mpi/pmi2")
	m := h.st.Launch
	// setup.c _setup_stepd_job_info: a het step is one PMI job.
	h.jobID, h.stepID = m.StepID.JobID, m.StepID.StepID
	if m.HetJobID != 0 && m.HetJobID != slurmproto.NoVal {
		h.jobID = m.HetJobID
	}
	h.nnodes, h.nodeID, h.ntasks = m.NNodes, uint32(h.st.NodeID), m.NTasks
	taskOffset := uint32(0)
	if m.HetJobOffset != slurmproto.NoVal {
		h.nnodes, h.nodeID, h.ntasks = m.HetJobNNodes, h.nodeID+m.HetJobNodeOffset, m.HetJobNTasks
		taskOffset = m.HetJobTaskOffset
	}
	for _, g := range h.st.GTIDs {
		h.gtids = append(h.gtids, g+taskOffset)
	}
	get := func(k string) (string, bool) { return env.Get(k) }
	take := func(k string) (string, bool) {
		v, ok := env.Get(k)
		env.Unset(k)
		return v, ok
	}
	cfg := pmi2.Config{
		JobID: h.jobID, StepID: h.stepID, NodeID: h.nodeID, NNodes: h.nnodes, NTasks: h.ntasks, GTIDs: h.gtids,
	}
	if v, ok := get(envPMIDebug); ok {
		cfg.Debugged = cparse.Atoi(v) != 0
	}
	if v, ok := take(envPMI2SpawnSeq); ok {
		h.spawned = cparse.Atoi(v) != 0
		cfg.SpawnerJobID, _ = take(envPMI2SpawnerJob)
	}
	if v, ok := take(envPMI2PMIJobID); ok {
		cfg.PMIJobID = v
	}
	nodeList, ok := take(envPMI2StepNodes)
	if !ok {
		return errors.New("mpi/pmi2: unable to find nodes in job environment")
	}
	if cfg.ProcMapping, ok = take(envPMI2ProcMapping); !ok {
		return errors.New("PMI2_PROC_MAPPING_ENV not found")
	}
	if v, ok := get(envStepResvPorts); ok {
		cfg.ResvPorts = v
		h.log.Info(fmt.Sprintf("_setup_stepd_job_info: SLURM_STEP_RESV_PORTS found %s", v))
	}
	_, cfg.NoDupKeys = get(envKVSNoDupKeys)

	conf := h.st.Conf
	h.resolve = fwddata.NewResolver(conf)

	// setup.c _setup_stepd_tree_info.
	nodes, err := hostlist.Expand(nodeList)
	if err != nil || int(h.nodeID) >= len(nodes) {
		return fmt.Errorf("mpi/pmi2: step node list %q has no node %d", nodeList, h.nodeID)
	}
	cfg.ThisNode = nodes[h.nodeID]
	width := int(conf.TreeWidth)
	if v, ok := get(envPMI2TreeWidth); ok {
		if w := cparse.Atoi(v); w >= 2 {
			width = w
		} else {
			h.log.Info(fmt.Sprintf("invalid PMI2 tree width value (%d) detected. fallback to default value.", w))
		}
	}
	parent, children := pmi2.StepdParent(int(h.nodeID), int(h.nnodes), width)
	if parent >= 0 {
		if parent >= len(nodes) {
			return fmt.Errorf("mpi/pmi2: tree parent %d outside the step's nodes", parent)
		}
		h.parent = nodes[parent]
	}
	cfg.Parent, cfg.NumChildren = h.parent, children
	srunHost, ok := get("SLURM_SRUN_COMM_HOST")
	if !ok {
		return errors.New("mpi/pmi2: unable to find srun comm ifhn in env")
	}
	port, ok := take(envPMI2SrunPort)
	if !ok {
		return errors.New("mpi/pmi2: unable to find srun pmi2 port in env")
	}
	h.srunAddr = net.JoinHostPort(srunHost, strconv.Itoa(cparse.Atoi(port)))

	// Preput pairs (setup.c _setup_stepd_kvs).
	n, _ := get(envPMI2PreputCount)
	for i := 0; i < cparse.Atoi(n); i++ {
		k, _ := get(envPMI2PPKey + strconv.Itoa(i))
		v, _ := get(envPMI2PPVal + strconv.Itoa(i))
		cfg.Preput = append(cfg.Preput, [2]string{k, v})
	}
	cfg.Hostname, _ = os.Hostname()
	cfg.NetInfo = func() string { return netInfo(cfg.Hostname) }

	if err := h.sockets(conf); err != nil {
		return err
	}
	h.srv = pmi2.NewServer(cfg, h, h.log)
	go h.acceptTree()
	for i, c := range h.stepdEnds {
		go h.srv.ServeTask(i, c)
	}
	h.log.Debug("mpi/pmi2: started agent thread", "parent", orSrun(h.parent), "children", children, "tree_width", width)
	return nil
}

func orSrun(p string) string {
	if p == "" {
		return "srun"
	}
	return p
}

// sockets is _setup_stepd_sockets: the tree socket (owned by the user, so
// that srun's forward-data through slurmd, connected as the user, reaches
// it) and one socketpair per task.
func (h *pmi2Host) sockets(conf *slurmconf.Config) error {
	h.log.Debug("mpi/pmi2: setup sockets")
	name := fmt.Sprintf("sock.pmi2.%d.%d", h.jobID, h.stepID)
	h.rawAddr = filepath.Join(conf.SlurmdSpoolDir, name)
	spool := slurmconf.ExpandPath(conf.SlurmdSpoolDir, h.st.Spec.NodeName, h.st.Spec.NodeName)
	h.sockPath = filepath.Join(spool, name)
	if len(h.sockPath) >= fwddata.SunPathMax {
		return fmt.Errorf("_setup_stepd_sockets: Unix socket path '%s' is too long. (%d > %d)", h.sockPath, len(h.sockPath)+1, fwddata.SunPathMax)
	}
	_ = os.Remove(h.sockPath) // an old socket of the same step id
	ln, err := net.Listen("unix", h.sockPath)
	if err != nil {
		return fmt.Errorf("mpi/pmi2: failed to bind tree socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	h.ln = ln
	if err := os.Chown(h.sockPath, int(h.st.UID), -1); err != nil {
		return fmt.Errorf("mpi/pmi2: failed to chown tree socket: %w", err)
	}
	// Stock binds under the umask slurmd inherited (0022 from systemd or a
	// shell): only the user and root may connect, as slurmd's
	// forward-data does with the sender's identity.
	if err := os.Chmod(h.sockPath, 0o755); err != nil {
		return fmt.Errorf("mpi/pmi2: failed to chmod tree socket: %w", err)
	}
	for range h.gtids {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mpi/pmi2: socketpair: %w", err)
		}
		f := os.NewFile(uintptr(fds[0]), "pmi2-stepd")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			syscall.Close(fds[1])
			return fmt.Errorf("mpi/pmi2: socketpair: %w", err)
		}
		h.stepdEnds = append(h.stepdEnds, c)
		h.taskEnds = append(h.taskEnds, os.NewFile(uintptr(fds[1]), "pmi2-task"))
	}
	return nil
}

// acceptTree serves the tree socket: each connection carries one message
// from this node's slurmd (REQUEST_FORWARD_DATA: uid first).
func (h *pmi2Host) acceptTree() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return // closed by Fini
		}
		go func() {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(PMI2TreeReadTimeout))
			h.srv.HandleTree(c, true)
		}()
	}
}

// Task is mpi_p_slurmstepd_task: the task's end of its socketpair as
// PMI_FD, and the PMI variables.
func (h *pmi2Host) Task(t MPITask) ([]string, []*os.File, error) {
	if t.LocalID < 0 || t.LocalID >= len(h.taskEnds) || h.taskEnds[t.LocalID] == nil {
		return nil, nil, fmt.Errorf("mpi/pmi2: no PMI socket for local task %d", t.LocalID)
	}
	env := []string{
		"PMI_FD=" + strconv.Itoa(t.FirstFD),
		"PMI_JOBID=" + h.srvJobID(),
		"PMI_RANK=" + strconv.FormatUint(uint64(h.gtids[t.LocalID]), 10),
		"PMI_SIZE=" + strconv.FormatUint(uint64(h.ntasks), 10),
	}
	if h.spawned {
		env = append(env, "PMI_SPAWNED=1") // PMI-1.1 needs it
	}
	return env, []*os.File{h.taskEnds[t.LocalID]}, nil
}

func (h *pmi2Host) srvJobID() string {
	if h.pmiJobID == "" {
		h.pmiJobID = fmt.Sprintf("%d.%d", h.jobID, h.stepID)
		if h.srv != nil {
			h.pmiJobID = h.srv.PMIJobID()
		}
	}
	return h.pmiJobID
}

// AfterFork closes the step manager's copies of the tasks' ends.
func (h *pmi2Host) AfterFork() {
	for i, f := range h.taskEnds {
		if f != nil {
			f.Close()
			h.taskEnds[i] = nil
		}
	}
}

// Fini is pmi2_cleanup_stepd: the tree socket goes, the tasks' sockets
// close.
func (h *pmi2Host) Fini() {
	if h.ln != nil {
		h.ln.Close()
	}
	h.AfterFork()
	for _, c := range h.stepdEnds {
		c.Close()
	}
}

// Up implements pmi2.Transport: to the parent step manager through its
// slurmd, or to srun (tree_msg_to_srun).
func (h *pmi2Host) Up(ctx context.Context, msg []byte) error {
	if h.parent != "" {
		if h.st.Caller == nil {
			return errors.New("mpi/pmi2: no client for REQUEST_FORWARD_DATA")
		}
		return fwddata.Send(ctx, h.st.Caller, h.resolve, []string{h.parent}, h.rawAddr, msg)
	}
	c, err := h.dialSrun(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return writeTreeMsg(c, msg)
}

// ToSrun implements pmi2.Transport (tree_msg_to_srun_with_resp).
func (h *pmi2Host) ToSrun(ctx context.Context, msg []byte) ([]byte, error) {
	c, err := h.dialSrun(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := writeTreeMsg(c, msg); err != nil {
		return nil, err
	}
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return nil, fmt.Errorf("mpi/pmi2: srun's answer: %w", err)
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n > pmi2.MaxTreeMsg {
		return nil, fmt.Errorf("mpi/pmi2: srun's answer of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, fmt.Errorf("mpi/pmi2: srun's answer: %w", err)
	}
	return b, nil
}

// KillStep implements pmi2.Transport: SIGKILL, as 22.05 and 24.11 send
// for every cause; 26.05 sends SIG_TERM_KILL for a task's abort.
func (h *pmi2Host) KillStep(abort bool) {
	if h.st.KillStep == nil {
		return
	}
	sig := uint16(syscall.SIGKILL)
	if abort && h.st.Spec.ProtocolVersion >= slurmproto.Version2605 {
		sig = slurmproto.SigTermKill
	}
	h.st.KillStep(sig)
}

func (h *pmi2Host) dialSrun(ctx context.Context) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", h.srunAddr)
	if err != nil {
		return nil, fmt.Errorf("mpi/pmi2: connect to srun %s: %w", h.srunAddr, err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	return c, nil
}

// writeTreeMsg is slurm_msg_sendto: htonl(len), then the message.
func writeTreeMsg(w io.Writer, msg []byte) error {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(msg)), uint32(len(msg)))
	if _, err := w.Write(append(b, msg...)); err != nil {
		return fmt.Errorf("mpi/pmi2: send to srun: %w", err)
	}
	return nil
}

// netInfo is info.c ifconfig: "(host,(ifname,IP_V4,addr),...)" over the
// non-loopback interfaces.
func netInfo(host string) string {
	var b strings.Builder
	b.WriteString("(" + host)
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			kind := "IP_V6"
			if ipn.IP.To4() != nil {
				kind = "IP_V4"
			}
			fmt.Fprintf(&b, ",(%s,%s,%s)", ifc.Name, kind, ipn.IP.String())
		}
	}
	b.WriteString(")")
	return b.String()
}
