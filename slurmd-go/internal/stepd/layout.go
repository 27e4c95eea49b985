package stepd

import (
	"errors"
	"fmt"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// layoutRequest is the part of slurm_step_layout_req_t the batch
// environment uses (one cpus_per_task value repeated on every host).
type layoutRequest struct {
	NodeList     string // the job's nodes, or SLURM_ARBITRARY_NODELIST
	Arbitrary    bool   // SLURM_DIST_ARBITRARY (else block)
	NumHosts     int
	NumTasks     uint32
	CPUsPerNode  []uint16
	CPUCountReps []uint32
	CPUsPerTask  uint16
	PackNodes    bool
}

var errLayout = errors.New("stepd: task layout failed")

// taskLayout returns the number of tasks per node as
// slurm_step_layout_create lays them out for the batch environment
// (src/common/slurm_step_layout.c: block, with CR_Pack_Nodes, or
// arbitrary from a host file).
func taskLayout(r layoutRequest) ([]uint16, error) {
	nodeList := r.NodeList
	var arbitrary []string
	if r.Arbitrary {
		hl, err := hostlist.Parse(nodeList)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errLayout, err)
		}
		arbitrary = hl.Hosts()
		hl.Uniq()
		nodeList = hl.String()
		r.NumHosts = hl.Count()
	}
	nodeCnt := r.NumHosts
	if nodeCnt == 0 {
		return nil, fmt.Errorf("%w: no hosts", errLayout)
	}
	hl, err := hostlist.Parse(nodeList)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errLayout, err)
	}
	if nodeCnt > hl.Count() {
		nodeCnt = hl.Count()
	}
	if nodeCnt < 1 {
		return nil, fmt.Errorf("%w: no hostlist", errLayout)
	}
	cpt := r.CPUsPerTask
	if cpt < 1 || cpt == 0xfffe {
		cpt = 1
	}
	cpus := make([]uint16, nodeCnt)
	cpuInx, cpuCnt := 0, uint32(0)
	for i := range cpus {
		if cpuInx >= len(r.CPUsPerNode) {
			return nil, fmt.Errorf("%w: cpu groups cover fewer hosts than %d", errLayout, nodeCnt)
		}
		cpus[i] = r.CPUsPerNode[cpuInx] / cpt
		if cpus[i] == 0 {
			cpus[i] = 1
		}
		cpuCnt++
		if cpuCnt >= r.CPUCountReps[cpuInx] {
			cpuInx++
			cpuCnt = 0
		}
	}
	tasks := make([]uint16, nodeCnt)
	switch {
	case r.Arbitrary:
		return layoutHostfile(hl.Hosts()[:nodeCnt], arbitrary, r.NumTasks)
	case r.PackNodes:
		layoutPack(tasks, cpus, r.NumTasks)
	default:
		layoutBlock(tasks, cpus, r.NumTasks)
	}
	return tasks, nil
}

// layoutBlock fakes a cyclic distribution to count tasks per node, then
// assigns them in blocks (_task_layout_block without pack_nodes).
func layoutBlock(tasks, cpus []uint16, n uint32) {
	var taskID uint32
	over := false
	for j := 0; taskID < n; j++ {
		space := false
		for i := 0; i < len(tasks) && taskID < n; i++ {
			if j < int(cpus[i]) || over {
				tasks[i]++
				taskID++
				if j+1 < int(cpus[i]) {
					space = true
				}
			}
		}
		if !space {
			over = true
		}
	}
}

// layoutPack is _task_layout_block with pack_nodes: one task per node,
// then fill each node, then spread the rest.
func layoutPack(tasks, cpus []uint16, n uint32) {
	var taskID uint32
	for i := 0; i < len(tasks) && taskID < n; i++ {
		if tasks[i] < cpus[i] {
			tasks[i]++
			taskID++
		}
	}
	for i := 0; i < len(tasks) && taskID < n; i++ {
		for tasks[i] < cpus[i] && taskID < n {
			tasks[i]++
			taskID++
		}
	}
	for taskID < n {
		for i := 0; i < len(tasks) && taskID < n; i++ {
			tasks[i]++
			taskID++
		}
	}
}

// layoutHostfile is _task_layout_hostfile: tasks per host in the sorted
// unique host order, counted from the arbitrary list (which must name
// exactly n tasks); hosts without tasks are skipped.
func layoutHostfile(hosts, arbitrary []string, n uint32) ([]uint16, error) {
	if uint32(len(arbitrary)) != n {
		return nil, fmt.Errorf("%w: asked for %d tasks, %d in the node list", errLayout, n, len(arbitrary))
	}
	tasks := make([]uint16, len(hosts))
	i := 0
	var placed uint32
	for _, h := range hosts {
		tasks[i] = 0
		for _, a := range arbitrary {
			if a == h {
				tasks[i]++
				placed++
			}
			if placed >= n {
				break
			}
		}
		if tasks[i] != 0 {
			i++
		}
		if i > int(n) {
			break
		}
	}
	if placed != n {
		return nil, fmt.Errorf("%w: asked for %d tasks, placed %d", errLayout, n, placed)
	}
	return tasks, nil
}
