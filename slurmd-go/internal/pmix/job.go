package pmix

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Job is what the helper registers for one step on one node: the step's
// layout and where the PMIx server and its clients keep their files.
type Job struct {
	JobID, StepID uint32
	UID, GID      uint32
	// NodeID is this node's index in Nodes.
	NodeID int
	// Nodes are the step's node names in step order (SLURM_STEP_NODELIST).
	Nodes []string
	// NodeRanks are each node's global ranks, in local task order.
	NodeRanks [][]uint32
	// ANLMap is SLURM_PMIX_MAPPING_SERV from srun (PMIX_ANL_MAP).
	ANLMap string
	// LibTmpDir is the server's directory (PMIX_SERVER_TMPDIR).
	LibTmpDir string
	// CliTmpDirBase and CliTmpDir are PMIX_TMPDIR and PMIX_NSDIR.
	CliTmpDirBase, CliTmpDir string
}

// ErrJob is a step layout the helper cannot be given.
var ErrJob = errors.New("pmix: bad step layout")

// Namespace is the step's PMIx namespace, as pmixp_info.c names it.
func (j *Job) Namespace() string { return fmt.Sprintf("slurm.pmix.%d.%d", j.JobID, j.StepID) }

// NTasks is the step's task count.
func (j *Job) NTasks() int {
	n := 0
	for _, r := range j.NodeRanks {
		n += len(r)
	}
	return n
}

// LocalRanks are this node's ranks.
func (j *Job) LocalRanks() []uint32 { return j.NodeRanks[j.NodeID] }

// Validate checks the layout: one rank list per node, every rank of
// 0..n-1 exactly once, tasks on this node.
func (j *Job) Validate() error {
	if len(j.Nodes) == 0 || len(j.NodeRanks) != len(j.Nodes) {
		return fmt.Errorf("%w: %d nodes, %d rank lists", ErrJob, len(j.Nodes), len(j.NodeRanks))
	}
	if j.NodeID < 0 || j.NodeID >= len(j.Nodes) {
		return fmt.Errorf("%w: node index %d of %d nodes", ErrJob, j.NodeID, len(j.Nodes))
	}
	for _, n := range j.Nodes {
		if n == "" || strings.ContainsAny(n, ",;\x00") {
			return fmt.Errorf("%w: node name %q", ErrJob, n)
		}
	}
	n := j.NTasks()
	seen := make([]bool, n)
	for node, ranks := range j.NodeRanks {
		for _, r := range ranks {
			if int64(r) >= int64(n) || seen[r] {
				return fmt.Errorf("%w: rank %d on node %s is out of range or repeated (%d tasks)", ErrJob, r, j.Nodes[node], n)
			}
			seen[r] = true
		}
	}
	if len(j.LocalRanks()) == 0 {
		return fmt.Errorf("%w: no tasks on node %s", ErrJob, j.Nodes[j.NodeID])
	}
	for _, s := range []string{j.ANLMap, j.LibTmpDir, j.CliTmpDir, j.CliTmpDirBase} {
		if strings.ContainsRune(s, 0) {
			return fmt.Errorf("%w: a NUL in %q", ErrJob, s)
		}
	}
	return nil
}

// nodeOf maps every rank to its node index.
func (j *Job) nodeOf() []int {
	m := make([]int, j.NTasks())
	for node, ranks := range j.NodeRanks {
		for _, r := range ranks {
			m[r] = node
		}
	}
	return m
}

// encode is the 'J' payload: NUL-terminated key=value strings.
func (j *Job) encode() []byte {
	var specs []string
	for _, ranks := range j.NodeRanks {
		s := make([]string, len(ranks))
		for i, r := range ranks {
			s[i] = strconv.FormatUint(uint64(r), 10)
		}
		specs = append(specs, strings.Join(s, ","))
	}
	kv := [][2]string{
		{"nspace", j.Namespace()},
		{"jobid", fmt.Sprintf("%d.%d", j.JobID, j.StepID)},
		{"uid", strconv.FormatUint(uint64(j.UID), 10)},
		{"gid", strconv.FormatUint(uint64(j.GID), 10)},
		{"nodeid", strconv.Itoa(j.NodeID)},
		{"ntasks", strconv.Itoa(j.NTasks())},
		{"hosts", strings.Join(j.Nodes, ",")},
		{"node_ranks", strings.Join(specs, ";")},
		{"anl_map", j.ANLMap},
		{"lib_tmpdir", j.LibTmpDir},
		{"cli_tmpdir", j.CliTmpDir},
		{"cli_tmpdir_base", j.CliTmpDirBase},
	}
	var b []byte
	for _, p := range kv {
		b = append(b, p[0]...)
		b = append(b, '=')
		b = append(b, p[1]...)
		b = append(b, 0)
	}
	return b
}

// Dirs are the step's directories as pmixp_info.c names them: the server's
// <SlurmdSpoolDir>/pmix.<job>.<step>/ and the clients'
// <base>/spmix_appdir_<uid>_<job>.<step>, base being the task environment's
// SLURM_PMIX_TMPDIR, else mpi.conf's PMIxCliTmpDirBase, else TmpFS (for this
// node).
func Dirs(spoolDir, cliBase string, uid, jobID, stepID uint32) (lib, cli string) {
	lib = filepath.Join(spoolDir, fmt.Sprintf("pmix.%d.%d", jobID, stepID)) + "/"
	cli = fmt.Sprintf("%s/spmix_appdir_%d_%d.%d", cliBase, uid, jobID, stepID)
	return lib, cli
}

// SocketName is the step manager's listener in the spool dir, the address
// other nodes' step managers send through REQUEST_FORWARD_DATA (stock's is
// stepd.slurm.pmix.<job>.<step>; this one is named apart since it speaks
// slurmd-go's exchange, not pmixp's).
func SocketName(jobID, stepID uint32) string {
	return fmt.Sprintf("stepd-go.pmix.%d.%d", jobID, stepID)
}
