package gresbind

import (
	"errors"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// EnvFlags are the device variables a node's GPUs ask for (the plugins'
// node_flags: the union of every gres.conf record's env flags, whatever its
// name, as gres_common_set_env_types_on_node_flags collects them).
type EnvFlags struct {
	NVML   bool // CUDA_VISIBLE_DEVICES
	RSMI   bool // ROCR_VISIBLE_DEVICES
	OneAPI bool // ZE_AFFINITY_MASK
	OpenCL bool // GPU_DEVICE_ORDINAL
	UUID   bool // 26.05 GRES_CONF_UUID: a device's UniqueId in the local list
}

// Plugin is one loaded GRES plugin of the node (a gres_context entry).
type Plugin struct {
	Name   string
	ID     uint32 // gres_build_id(Name): the credential records' plugin_id
	Shared bool   // shard, mps (GRES_CONF_SHARED): shares the GPUs' devices
	// GlobalIndex is 24.11's GRES_CONF_GLOBAL_INDEX: the environment
	// keeps node-wide indexes even under ConstrainDevices.
	GlobalIndex bool
	// Devices are the plugin's device files ordered by Index (a shared
	// GRES has the GPUs' files: its bitmaps index GPUs).
	Devices []gres.Device
}

// Node is what the step manager knows of its node's GRES.
type Node struct {
	// Release is the protocol version the step speaks (slurmproto.Version*).
	Release uint16
	// Plugins in gres_context order: a sharing GRES (gpu) before the shared
	// ones (shard, mps), which must not clear what the GPU set.
	Plugins []Plugin
	Env     EnvFlags
	// LocalIndex is gres_use_local_device_index: TaskPlugin task/cgroup
	// with ConstrainDevices=yes, so that a task sees its devices from 0.
	LocalIndex bool
}

const gpuName = "gpu"

// ErrNoDevices is wrapped when a configured GRES has no usable device file.
var ErrNoDevices = errors.New("gresbind: no device files")

// NewNode builds the node's plugins from its gres.conf records (and any
// autodetected ones), in the order of slurm.conf's GresTypes, as stock's
// node_config_load does for the plugins that set environments: gpu, shard,
// mps (others carry no devices here). stat is gres.StatDevice unless a test
// passes its own. Device errors (a File= entry that is no device) are
// returned joined with the node that was built from the rest, as stock
// logs them and goes on.
func NewNode(recs []gres.Record, gresTypes []string, release uint16, localIndex bool, stat gres.StatFunc) (*Node, error) {
	n := &Node{Release: release, LocalIndex: localIndex}
	for _, r := range recs {
		n.Env.NVML = n.Env.NVML || r.Flags.EnvNVML
		n.Env.RSMI = n.Env.RSMI || r.Flags.EnvRSMI
		n.Env.OneAPI = n.Env.OneAPI || r.Flags.EnvOneAPI
		n.Env.OpenCL = n.Env.OpenCL || r.Flags.EnvOpenCL
		n.Env.UUID = n.Env.UUID || r.Flags.UUID
	}
	var errs []error
	var gpuDevs []gres.Device
	gpuLoaded := false
	names := orderTypes(gresTypes)
	for _, name := range names {
		p := Plugin{Name: name, ID: slurmproto.GresBuildID(name), Shared: name == "shard" || name == "mps"}
		for _, r := range recs {
			if r.Name == name && r.Flags.GlobalIndex {
				p.GlobalIndex = true
			}
		}
		switch {
		case name == gpuName:
			devs, err := gres.Devices(recs, gpuName, stat)
			if err != nil {
				errs = append(errs, err)
			}
			gpuDevs, gpuLoaded = devs, true
			p.Devices = devs
		case p.Shared:
			if !gpuLoaded {
				devs, err := gres.Devices(recs, gpuName, stat)
				if err != nil {
					errs = append(errs, err)
				}
				gpuDevs, gpuLoaded = devs, true
			}
			p.Devices = gpuDevs
		default:
			continue // no environment plugin modelled (nic, count-only GRES)
		}
		n.Plugins = append(n.Plugins, p)
	}
	return n, errors.Join(errs...)
}

// orderTypes puts gpu first and shard/mps last, keeping GresTypes order
// otherwise (stock loads the sharing plugin before the shared ones).
func orderTypes(types []string) []string {
	var head, mid, tail []string
	seen := map[string]bool{}
	for _, t := range types {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		switch t {
		case gpuName:
			head = append(head, t)
		case "shard", "mps":
			tail = append(tail, t)
		default:
			mid = append(mid, t)
		}
	}
	return append(append(head, mid...), tail...)
}

// plugin returns the plugin named name, nil when it is not loaded.
func (n *Node) plugin(name string) *Plugin {
	for i := range n.Plugins {
		if n.Plugins[i].Name == name {
			return &n.Plugins[i]
		}
	}
	return nil
}

// v2411 reports whether the node speaks 24.11 or later.
func (n *Node) v2411() bool { return n.Release >= slurmproto.Version2411 }
