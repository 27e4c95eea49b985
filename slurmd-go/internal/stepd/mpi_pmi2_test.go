package stepd

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/pmi2"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// recordingCaller stands for slurmd: it records forward-data requests.
type recordingCaller struct {
	mu   sync.Mutex
	host []string
	msgs []*slurmproto.ForwardData
}

func (r *recordingCaller) CallAddr(ctx context.Context, host string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host = append(r.host, host)
	r.msgs = append(r.msgs, body.(*slurmproto.ForwardData))
	return &slurmproto.ReturnCode{}, nil
}

// pmi2Step is a two-node step of one task on node nodeID, its slurm.conf
// and spool in dir, srun's PMI port srunPort.
func pmi2Step(t *testing.T, dir string, nodeID int, srunPort int, caller AddrCaller) (*MPIStep, Env) {
	t.Helper()
	conf := filepath.Join(dir, "slurm.conf")
	text := "ClusterName=c\nSlurmctldHost=localhost(127.0.0.1)\nSlurmdSpoolDir=" + dir + "/spool/%n\nTreeWidth=1\n" +
		"NodeName=t1 NodeAddr=127.0.0.1 Port=28091\nNodeName=t2 NodeAddr=127.0.0.1 Port=28092\nPartitionName=p Nodes=ALL\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	node := fmt.Sprintf("t%d", nodeID+1)
	if err := os.MkdirAll(filepath.Join(dir, "spool", node), 0o755); err != nil {
		t.Fatal(err)
	}
	sc, err := slurmconf.Load(conf, slurmconf.Options{Version: slurmconf.Lenient})
	if err != nil {
		t.Fatal(err)
	}
	st := &MPIStep{
		Conf: sc, ConfPath: conf,
		Spec: &stepapi.StartSpec{ConfFile: conf, NodeName: node, ProtocolVersion: slurmproto.Version2205},
		Launch: &slurmproto.LaunchTasks{
			StepID: slurmproto.StepID{JobID: 7, StepID: 0, StepHetComp: slurmproto.NoVal},
			NNodes: 2, NTasks: 2, HetJobID: slurmproto.NoVal, HetJobOffset: slurmproto.NoVal,
		},
		NodeID: nodeID, GTIDs: []uint32{uint32(nodeID)}, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()),
		Caller: caller, Log: hclog.NewNullLogger(),
	}
	env := Env{
		"SLURM_PMI2_STEP_NODES=t[1-2]", "SLURM_PMI2_PROC_MAPPING=(vector,(0,2,1))",
		"SLURM_PMI2_SRUN_PORT=" + strconv.Itoa(srunPort), "SLURM_SRUN_COMM_HOST=127.0.0.1",
		"SLURM_PMI2_PREPUT_COUNT=1", "SLURM_PMI2_PPKEY0=pk", "SLURM_PMI2_PPVAL0=pv", "PATH=/bin",
	}
	return st, env
}

// taskConn is the task's PMI_FD as a connection.
func taskConn(t *testing.T, f *os.File) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

func ask(t *testing.T, c net.Conn, r *bufio.Reader, req, want string) {
	t.Helper()
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if want == "" {
		return
	}
	got, err := r.ReadString('\n')
	if err != nil || got != want {
		t.Fatalf("%q: got %q (%v), want %q", req, got, err, want)
	}
}

// TestPMI2Host_FirstLevel: node 0 of a two-node step reports to srun: Prefork takes srun's variables out of the step's
// environment, makes the tree socket, gives the task PMI_FD and the PMI
// variables; the task's fence reaches "srun" over TCP, srun's answer
// through the tree socket (as slurmd delivers it) ends the barrier.
func TestPMI2Host_FirstLevel(t *testing.T) {
	dir := t.TempDir()
	srun, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srun.Close()
	st, env := pmi2Step(t, dir, 0, srun.Addr().(*net.TCPAddr).Port, nil)
	// srun's --mpi=pmi2 width wins over TreeWidth=1 (under which node 1
	// would report to node 0): both nodes report to srun.
	env = append(env, "SLURM_PMI2_TREE_WIDTH=2")
	h, _ := newPMI2Host(st)
	if err := h.Prefork(context.Background(), &env); err != nil {
		t.Fatal(err)
	}
	defer h.Fini()
	for _, k := range []string{"SLURM_PMI2_STEP_NODES", "SLURM_PMI2_PROC_MAPPING", "SLURM_PMI2_SRUN_PORT"} {
		if _, ok := env.Get(k); ok {
			t.Errorf("%s left in the step's environment", k)
		}
	}
	if _, ok := env.Get("SLURM_SRUN_COMM_HOST"); !ok {
		t.Error("SLURM_SRUN_COMM_HOST removed")
	}
	sock := filepath.Join(dir, "spool", "t1", "sock.pmi2.7.0")
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("tree socket: %v %v", fi, err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != st.UID || fi.Mode().Perm() != 0o755 {
		t.Errorf("tree socket owned by %d, mode %v", uid, fi.Mode().Perm())
	}
	tenv, files, err := h.Task(MPITask{LocalID: 0, GlobalID: 0, NTasks: 2, FirstFD: 4})
	if err != nil || len(files) != 1 {
		t.Fatalf("Task: %v %v", files, err)
	}
	if got := strings.Join(tenv, " "); got != "PMI_FD=4 PMI_JOBID=7.0 PMI_RANK=0 PMI_SIZE=2" {
		t.Errorf("task env %q", got)
	}
	c, r := taskConn(t, files[0])
	h.AfterFork()
	ask(t, c, r, "cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	ask(t, c, r, "cmd=get kvsname=7.0 key=pk\n", "cmd=get_result rc=0 value=pv\n")
	ask(t, c, r, "cmd=put kvsname=7.0 key=card0 value=x\n", "cmd=put_result rc=0\n")
	ask(t, c, r, "cmd=barrier_in\n", "")
	// srun receives htonl(len) and the fence of node 0.
	_ = srun.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
	sc, err := srun.Accept()
	if err != nil {
		t.Fatal(err)
	}
	var lb [4]byte
	if _, err := io.ReadFull(sc, lb[:]); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, binary.BigEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(sc, msg); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	f, err := pmi2.ParseFence(msg[2:])
	if err != nil || f.FromNode != "t1" || f.Seq != 1 || f.NumChildren != 1 {
		t.Fatalf("fence %+v %v", f, err)
	}
	// srun's answer through slurmd: htonl(uid), htonl(len), data.
	resp := pmi2.FenceResp(1, [][2]string{{"card1", "y"}})
	tc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32(nil, st.UID)
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(resp)))
	if _, err := tc.Write(append(frame, resp...)); err != nil {
		t.Fatal(err)
	}
	tc.Close()
	if got, err := r.ReadString('\n'); err != nil || got != "cmd=barrier_out rc=0\n" {
		t.Fatalf("barrier: %q %v", got, err)
	}
	ask(t, c, r, "cmd=get kvsname=7.0 key=card1\n", "cmd=get_result rc=0 value=y\n")
	h.Fini()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("tree socket left after Fini: %v", err)
	}
}

// TestPMI2Host_Child: node 1 of the same step sends its fence to node 0
// (TreeWidth=1) through REQUEST_FORWARD_DATA to t1's slurmd, with the
// unexpanded spool directory for t1's slurmd to expand.
func TestPMI2Host_Child(t *testing.T) {
	dir := t.TempDir()
	caller := &recordingCaller{}
	st, env := pmi2Step(t, dir, 1, 1, caller)
	h, _ := newPMI2Host(st)
	if err := h.Prefork(context.Background(), &env); err != nil {
		t.Fatal(err)
	}
	defer h.Fini()
	_, files, err := h.Task(MPITask{LocalID: 0, GlobalID: 1, NTasks: 2, FirstFD: 4})
	if err != nil {
		t.Fatal(err)
	}
	c, r := taskConn(t, files[0])
	h.AfterFork()
	ask(t, c, r, "cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n")
	ask(t, c, r, "cmd=barrier_in\n", "")
	deadline := time.Now().Add(20 * time.Second)
	for {
		caller.mu.Lock()
		n := len(caller.msgs)
		caller.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	caller.mu.Lock()
	defer caller.mu.Unlock()
	if len(caller.msgs) != 1 {
		t.Fatalf("%d forward-data requests", len(caller.msgs))
	}
	m := caller.msgs[0]
	if caller.host[0] != "127.0.0.1:28091" || m.Address != dir+"/spool/%n/sock.pmi2.7.0" || int(m.Len) != len(m.Data) {
		t.Fatalf("sent to %s: %+v", caller.host[0], m)
	}
	f, err := pmi2.ParseFence(m.Data[2:])
	if err != nil || f.FromNodeID != 1 || f.FromNode != "t2" {
		t.Fatalf("fence %+v %v", f, err)
	}
}

// TestPMI2Host_MissingEnv: a step without srun's pmi2 variables fails its
// prefork with stock's message.
func TestPMI2Host_MissingEnv(t *testing.T) {
	st, env := pmi2Step(t, t.TempDir(), 0, 1, nil)
	env.Unset("SLURM_PMI2_STEP_NODES")
	h, _ := newPMI2Host(st)
	err := h.Prefork(context.Background(), &env)
	if err == nil || !strings.Contains(err.Error(), "unable to find nodes in job environment") {
		t.Fatalf("err %v", err)
	}
	h.Fini()
}
