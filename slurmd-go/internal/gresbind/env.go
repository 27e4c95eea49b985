package gresbind

import (
	"strconv"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/envarray"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Launch is what one step brings to the binding: the credential's decoded
// GRES lists, this node's index in the job (the credential's job_hostlist),
// and the launch's binding request.
type Launch struct {
	Job  []slurmproto.GresJobState
	Step []slurmproto.GresStepState
	// NodeIndex is this node's position in the job's node list.
	NodeIndex int
	// TresBind and AccelBindType are the launch message's tres_bind
	// (srun --gpu-bind, --gpus-per-task: "gpu:per_task:1" in 22.05,
	// "gres/gpu:per_task:1" from 24.11) and accel_bind_type.
	TresBind      string
	AccelBindType uint16
}

// The kinds of environment stock sets (is_job / neither / is_task).
type envKind int

const (
	kindJob envKind = iota
	kindStep
	kindTask
)

// JobEnv sets the environment of a batch step (and the interactive step)
// from the job's GRES: gres_g_job_set_env.
func (n *Node) JobEnv(env *envarray.Env, l *Launch) {
	sharing := false
	protect := false
	for i := range n.Plugins {
		p := &n.Plugins[i]
		a := jobAlloc(l.Job, l.NodeIndex, p.ID)
		if a.found && p.Name == gpuName {
			sharing = true
		}
		if p.Shared && sharing {
			protect = true
		}
		n.setEnv(env, p, kindJob, a.bits, nil, a.cnt, protect)
	}
}

// StepEnv sets the environment every task of an srun step starts from:
// gres_g_step_set_env.
func (n *Node) StepEnv(env *envarray.Env, l *Launch) {
	sharing := false
	protect := false
	for i := range n.Plugins {
		p := &n.Plugins[i]
		a := stepAlloc(l.Step, l.NodeIndex, p.ID)
		if a.found && p.Name == gpuName {
			sharing = true
		}
		if p.Shared && sharing {
			protect = true
		}
		n.setEnv(env, p, kindStep, a.bits, nil, a.cnt, protect)
	}
}

// HasTaskBinding reports whether stock rewrites each task's environment
// (exec_task: an srun step with accel_bind_type or tres_bind).
func (l *Launch) HasTaskBinding() bool { return l.AccelBindType != 0 || l.TresBind != "" }

// TaskEnv rewrites the environment of the step's task localID (its index
// on this node) for the binding request: gres_g_task_set_env. Call it only
// when HasTaskBinding.
func (n *Node) TaskEnv(env *envarray.Env, l *Launch, localID int) {
	sharing := false
	protect := false
	for i := range n.Plugins {
		p := &n.Plugins[i]
		a := stepAlloc(l.Step, l.NodeIndex, p.ID)
		if a.found && p.Name == gpuName {
			sharing = true
		}
		usable, ok := n.usable(p, localID, l, a, false)
		if !ok {
			continue // stock: the plugin's binding is an error; env untouched
		}
		if p.Shared && sharing {
			protect = true
		}
		n.setEnv(env, p, kindTask, a.bits, usable, a.cnt, protect)
	}
}

// setEnv is the plugin's {job,step,task}_set_env: gres_common_gpu_set_env
// and, for shard, SLURM_SHARDS_ON_NODE.
func (n *Node) setEnv(env *envarray.Env, p *Plugin, kind envKind, alloc, usable bits, cnt uint64, protect bool) {
	globalList, localList := n.lists(p, kind, alloc, usable)
	slurmVar := "SLURM_STEP_GPUS"
	if kind == kindJob {
		slurmVar = "SLURM_JOB_GPUS"
	}
	if c := alloc.count(); c > 0 {
		env.Overwrite("SLURM_GPUS_ON_NODE", strconv.Itoa(c))
	} else if !protect {
		env.Unset("SLURM_GPUS_ON_NODE")
	}
	if globalList != "" {
		env.Overwrite(slurmVar, globalList)
	} else if !protect {
		env.Unset(slurmVar)
	}
	for _, v := range n.deviceVars() {
		if localList != "" {
			env.Overwrite(v, localList)
		} else if !protect {
			env.Unset(v)
		}
	}
	if p.Name == "shard" {
		if cnt > 0 {
			env.Overwrite("SLURM_SHARDS_ON_NODE", strconv.FormatUint(cnt, 10))
		} else if !protect {
			env.Unset("SLURM_SHARDS_ON_NODE")
		}
	}
}

// deviceVars are the variables the node's env flags ask for, in stock's order.
func (n *Node) deviceVars() []string {
	var out []string
	if n.Env.NVML {
		out = append(out, "CUDA_VISIBLE_DEVICES")
	}
	if n.Env.RSMI {
		out = append(out, "ROCR_VISIBLE_DEVICES")
	}
	if n.Env.OneAPI {
		out = append(out, "ZE_AFFINITY_MASK")
	}
	if n.Env.OpenCL {
		out = append(out, "GPU_DEVICE_ORDINAL")
	}
	return out
}

// localIndex is the plugin's gres_use_local_device_index (a 24.11 global
// index flag turns it off).
func (n *Node) localIndex(p *Plugin) bool {
	if n.v2411() && p.GlobalIndex {
		return false
	}
	return n.LocalIndex
}

// lists is common_gres_set_env: the global list (node-wide indexes, for
// SLURM_*_GPUS) and the local one (what the device variables get), ""
// when nothing is set.
func (n *Node) lists(p *Plugin, kind envKind, alloc, usable bits) (string, string) {
	if len(p.Devices) == 0 || (kind == kindTask && usable == nil) || alloc == nil {
		return "", ""
	}
	local := n.localIndex(p)
	var g, l strings.Builder
	localInx := 0
	devIndex := -1
	considered := false
	for _, d := range p.Devices {
		if !alloc.test(d.Index) {
			continue
		}
		// MultipleFiles: several files, one device.
		if devIndex < d.Index {
			devIndex, considered = d.Index, false
		}
		if considered {
			continue
		}
		globalIdx := d.Index
		index := globalIdx
		if local {
			index = localInx
			localInx++
		}
		if kind == kindTask {
			bit := d.Index
			if local {
				bit = index
			}
			if !usable.test(bit) {
				considered = true
				continue
			}
		}
		if l.Len() > 0 {
			l.WriteByte(',')
			g.WriteByte(',')
		}
		if d.UniqueID != "" && (n.Release < slurmproto.Version2605 || n.Env.UUID) {
			l.WriteString(d.UniqueID)
		} else {
			l.WriteString(strconv.Itoa(index))
		}
		g.WriteString(strconv.Itoa(globalIdx))
		considered = true
	}
	return g.String(), l.String()
}
