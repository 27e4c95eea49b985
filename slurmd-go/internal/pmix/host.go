package pmix

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fwddata"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepd"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// HelperName is the helper's file name beside slurmstepd-go;
// TIEE_PMIX_HELPER names another.
const HelperName = "slurmd-go-pmix"

// Every pmix plugin id srun may send (mpi/pmix is a link to one of them).
func init() {
	for _, id := range []uint32{slurmproto.MPIPluginPMIx2, slurmproto.MPIPluginPMIx3, slurmproto.MPIPluginPMIx4, slurmproto.MPIPluginPMIx5} {
		stepd.RegisterMPIHost(id, newHost)
	}
}

// host is mpi/pmix's slurmstepd side (mpi_pmix.c) on the stepd seam.
type host struct {
	st  *stepd.MPIStep
	log hclog.Logger
	srv *Server
	// srun's abort agent, from the step's environment at Prefork
	srunHost, abortPort string
}

func newHost(st *stepd.MPIStep) (stepd.MPIHost, error) {
	return &host{st: st, log: st.Log.Named("pmix")}, nil
}

// helperPath is TIEE_PMIX_HELPER, else slurmd-go-pmix beside this binary.
func helperPath() (string, error) {
	if p := os.Getenv("TIEE_PMIX_HELPER"); p != "" {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("pmix: find %s: %w", HelperName, err)
	}
	return filepath.Join(filepath.Dir(exe), HelperName), nil
}

// Prefork is mpi_p_slurmstepd_prefork: the step's layout from its launch
// and environment (pmixp_info_set), its directories, listener and server.
func (h *host) Prefork(ctx context.Context, env *stepd.Env) error {
	st, m, spec := h.st, h.st.Launch, h.st.Spec
	nodelist, ok := env.Get("SLURM_STEP_NODELIST")
	if !ok {
		return fmt.Errorf("pmix: environment variable SLURM_STEP_NODELIST not found")
	}
	nodes, err := hostlist.Expand(nodelist)
	if err != nil {
		return fmt.Errorf("pmix: SLURM_STEP_NODELIST %q: %w", nodelist, err)
	}
	anl, ok := env.Get("SLURM_PMIX_MAPPING_SERV")
	if !ok {
		return fmt.Errorf("pmix: no SLURM_PMIX_MAPPING_SERV environment variable found")
	}
	if len(m.GlobalTaskIDs) != len(nodes) {
		return fmt.Errorf("pmix: %d nodes in SLURM_STEP_NODELIST, %d in the launch", len(nodes), len(m.GlobalTaskIDs))
	}
	h.srunHost, _ = env.Get("SLURM_SRUN_COMM_HOST")
	h.abortPort, _ = env.Get("SLURM_PMIXP_ABORT_AGENT_PORT")
	conf, confPath := st.Conf, st.ConfPath
	// Stock's slurmd reads mpi.conf when it starts (and on reconfigure) and
	// hands it to slurmstepd; here each step reads it, so a bad line fails
	// this launch (stock's slurmd would not start).
	pc, err := slurmconf.LoadPMIx(slurmconf.MPIConfPath(confPath), slurmconf.Options{Version: slurmconf.Lenient})
	if err != nil {
		return fmt.Errorf("pmix: %w", err)
	}
	for _, w := range pc.Warnings {
		h.log.Debug("mpi.conf", "file", w.File, "line", w.Line, "msg", w.Msg)
	}
	helperConfEnv := applyConf(env, pc, h.log)
	cliBase := spec.TmpFS
	if v, ok := env.Get("SLURM_PMIX_TMPDIR"); ok && v != "" {
		cliBase = v
	} else if pc.CliTmpDirBase != "" {
		cliBase = pc.CliTmpDirBase
	}
	timeout := time.Duration(pc.Timeout) * time.Second
	if v, ok := env.Get("SLURM_PMIX_TIMEOUT"); ok {
		timeout = ParseTimeout(v)
	}
	path, err := helperPath()
	if err != nil {
		return err
	}
	jobID := st.Launch.StepID.JobID
	if m.HetJobID != 0 && m.HetJobID != slurmproto.NoVal {
		return fmt.Errorf("pmix: heterogeneous steps are not hosted by slurmd-go")
	}
	stepID := m.StepID.StepID
	job := Job{JobID: jobID, StepID: stepID, UID: st.UID, GID: st.GID, NodeID: st.NodeID, Nodes: nodes, NodeRanks: m.GlobalTaskIDs, ANLMap: anl, CliTmpDirBase: cliBase}
	job.LibTmpDir, job.CliTmpDir = Dirs(spec.SpoolDir, cliBase, st.UID, jobID, stepID)
	resolve := fwddata.NewResolver(conf)
	h.srv, err = Start(ctx, Config{
		Job: job, HelperPath: path, Groups: m.Gids, HelperEnv: append(os.Environ(), helperConfEnv...),
		SpoolDir:      spec.SpoolDir,
		RemoteAddress: conf.SlurmdSpoolDir + "/" + SocketName(jobID, stepID),
		Sender:        sender{c: st.Caller, resolve: resolve},
		Timeout:       timeout,
		OnFatal: func(err error) {
			// pmixp: an error the step cannot survive kills it everywhere
			h.log.Error("killing the step", "error", err)
			st.KillStep(uint16(syscall.SIGKILL))
		},
		OnAbort: func(status int32, rank uint32, msg string) {
			h.abortPropagate(status)
			st.KillStep(uint16(syscall.SIGKILL))
		},
		Log: h.log,
	})
	return err
}

// applyConf is what _env_set does with mpi.conf before it reads the
// step's SLURM_PMIX_* variables: PMIxEnv's pairs overwrite the step's
// environment (every task's) and go to the PMIx server's (stock setenv()s
// them in slurmstepd); PMIxDebug, unless the step sets PMIX_DEBUG, becomes
// the server library's PMIX_DEBUG, its output to files in its tmpdir
// (PMIX_OUTPUT_REDIRECT=file), as stock. It returns the helper's extra
// variables. Keys asking for a transport slurmd-go does not have are
// logged once per step, by name; the fence always goes through slurmd
// (REQUEST_FORWARD_DATA) to every node of the step.
func applyConf(env *stepd.Env, pc *slurmconf.PMIxConf, log hclog.Logger) []string {
	var helper []string
	for _, kv := range pc.EnvPairs() {
		env.Overwrite(kv[0], kv[1])
		helper = append(helper, kv[0]+"="+kv[1])
	}
	if v, ok := env.Get("PMIX_DEBUG"); ok {
		helper = append(helper, "PMIX_DEBUG="+v, "PMIX_OUTPUT_REDIRECT=file")
	} else if pc.Debug > 0 {
		helper = append(helper, fmt.Sprintf("PMIX_DEBUG=%d", pc.Debug), "PMIX_OUTPUT_REDIRECT=file")
	}
	if pc.Debug > 0 {
		log.Info("mpi.conf", "file", pc.File, "keys", pc.Set, "PMIxCliTmpDirBase", pc.CliTmpDirBase, "PMIxTimeout", pc.Timeout, "PMIxEnv", pc.Env)
	}
	unserved := []struct {
		key  string
		asks bool
	}{
		{"PMIxCollFence", pc.CollFence != ""},
		{"PMIxDirectConnEarly", pc.DirectConnEarly},
		{"PMIxDirectConnUCX", pc.DirectConnUCX},
		{"PMIxDirectSameArch", pc.DirectSameArch},
		{"PMIxFenceBarrier", pc.FenceBarrier},
		{"PMIxNetDevicesUCX", pc.NetDevicesUCX != ""},
		{"PMIxTlsUCX", pc.TlsUCX != ""},
	}
	for _, u := range unserved {
		if u.asks {
			log.Warn("mpi.conf key not served by slurmd-go: its fence goes through slurmd to every node", "key", u.key, "file", pc.File)
		}
	}
	return helper
}

// abortTimeout bounds telling srun's abort agent a PMIx_Abort status.
const abortTimeout = 10 * time.Second

// abortPropagate is pmixp_abort_propagate: htonl(status) to srun's abort
// agent (SLURM_SRUN_COMM_HOST:SLURM_PMIXP_ABORT_AGENT_PORT), which echoes it
// and makes it srun's exit code.
func (h *host) abortPropagate(status int32) {
	host, port := h.srunHost, h.abortPort
	if host == "" || port == "" || port == "0" {
		h.log.Error("invalid abort agent connection address", "host", host, "port", port)
		return
	}
	addr := net.JoinHostPort(host, port)
	c, err := net.DialTimeout("tcp", addr, abortTimeout)
	if err != nil {
		h.log.Error("connecting to abort agent failed", "addr", addr, "error", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(abortTimeout))
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(status))
	if _, err := c.Write(b[:]); err == nil {
		_, err = io.ReadFull(c, b[:])
	}
	if err != nil {
		h.log.Error("communicating with abort agent failed", "addr", addr, "error", err)
	}
}

// sender is fwddata.Send through the step manager's caller.
type sender struct {
	c       fwddata.Caller
	resolve fwddata.Resolver
}

func (s sender) Send(ctx context.Context, nodes []string, address string, data []byte) error {
	if s.c == nil {
		return fmt.Errorf("pmix: the step manager has no RPC caller for REQUEST_FORWARD_DATA")
	}
	return fwddata.Send(ctx, s.c, s.resolve, nodes, address, data)
}

// Task is mpi_p_slurmstepd_task: the helper's PMIx_server_setup_fork
// variables overwrite the task's.
func (h *host) Task(t stepd.MPITask) ([]string, []*os.File, error) {
	env := h.srv.TaskEnv(t.GlobalID)
	if env == nil {
		return nil, nil, fmt.Errorf("pmix: no PMIx environment for rank %d", t.GlobalID)
	}
	return env, nil, nil
}

func (h *host) AfterFork() {}

// Fini is mpi_p_slurmstepd_fini / pmixp_stepd_finalize.
func (h *host) Fini() {
	if h.srv != nil {
		h.srv.Close()
	}
}
