package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/k8snode"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/k8stopo"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// K8sLabelsTimeout bounds the wait for the Node's labels before the
// first registration, so that it already carries their features.
const K8sLabelsTimeout = 10 * time.Second

// K8sDrainTimeout bounds one drain or resume that a cordon asks for.
const K8sDrainTimeout = 30 * time.Second

// K8sStatePeriod is how often slurmctld's view of the node is read for
// the Node's SlurmNodeDrained condition: one REQUEST_NODE_INFO_SINGLE per
// node per period, kept slow so that a thousand nodes cost slurmctld
// about 30 RPCs a second.
const K8sStatePeriod = 30 * time.Second

// DrainCondition is the Node condition that shows a Slurm drain.
const DrainCondition = "SlurmNodeDrained"

// K8sReasonPrefix starts the reason of every drain Kubernetes asked for
// (cordon, a Node condition, a deleted pod). Only such a drain is ever
// lifted, once nothing asks for it: an administrator's never is.
const K8sReasonPrefix = "k8s: "

// CordonReason drains the node of a cordoned Kubernetes node.
const CordonReason = K8sReasonPrefix + "node cordoned"

// PodDeletedReason is the drain of the pod's preStop hook (slurmd-go
// prestop): no new jobs while the pod goes; its successor lifts it.
const PodDeletedReason = K8sReasonPrefix + "pod deleted"

// k8sDrainReason is the drain Kubernetes asks for ("" none): the cordon
// first, then the first of types whose condition is bad (Ready when not
// True, any other when True).
func k8sDrainReason(cordoned bool, conds []corev1.NodeCondition, types []string) string {
	if cordoned {
		return CordonReason
	}
	for _, t := range types {
		for _, c := range conds {
			if string(c.Type) != t {
				continue
			}
			if bad := (t == string(corev1.NodeReady)) != (c.Status == corev1.ConditionTrue); bad {
				return fmt.Sprintf("%snode condition %s=%s", K8sReasonPrefix, c.Type, c.Status)
			}
		}
	}
	return ""
}

// k8sState is what the Node's labels gave; nil features until the first
// label set.
type k8sState struct {
	mu        sync.Mutex
	features  []string // sorted; nil: none delivered yet
	placement *k8stopo.Placement

	cordoned atomic.Bool // what Kubernetes says now
	conds    atomic.Pointer[[]corev1.NodeCondition]
	drainMu  sync.Mutex // one drain or resume at a time
	asked    string     // the drain last asked for; guarded by drainMu
	// registered, if set, runs after the first accepted registration:
	// a dynamic node exists in slurmctld only from then on.
	registered     atomic.Pointer[func()]
	registeredOnce atomic.Bool
}

// topoConfig reads the --k8s-* flags.
func topoConfig(f config.Flags) (k8stopo.Config, error) {
	cfg, err := k8stopo.ParseConfig(f.K8sTopologyLabels, f.K8sBlockLabel, f.K8sFeatureLabels)
	if err != nil {
		return cfg, fmt.Errorf("daemon: --k8s-block-label needs --k8s-topology-labels: %w", err)
	}
	return cfg, nil
}

// startK8s watches the pod's Node (--k8s-node) and waits, at most
// K8sLabelsTimeout, for its first labels.
func (d *Daemon) startK8s(ctx context.Context, cfg *config.Config) error {
	f := cfg.Flags
	if f.K8sNode == "" {
		return nil
	}
	tc, err := topoConfig(f)
	if err != nil {
		return err
	}
	rc, err := k8snode.Config()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("daemon: Kubernetes client: %w", err)
	}
	first := make(chan struct{})
	var once sync.Once
	log := d.log.Named("k8s")
	w := &k8snode.Watcher{Node: f.K8sNode, Client: cs, Log: log, OnLabels: func(l map[string]string) {
		before := d.k8sTopologySpec(DynamicTopologySince)
		if d.applyLabels(l, tc) {
			d.Reregister()
		}
		// The first registration carries the topology; later changes go
		// as node updates.
		if d.k8sTopologySpec(DynamicTopologySince) != before && d.k8s.registeredOnce.Load() {
			go d.updateTopology(ctx)
		}
		once.Do(func() { close(first) })
	}, OnCordon: func(c bool) {
		d.k8s.cordoned.Store(c)
		go d.syncDrain(ctx) // RPCs to slurmctld: off the informer's goroutine
	}, OnConditions: func(c []corev1.NodeCondition) {
		d.k8s.conds.Store(&c)
		go d.syncDrain(ctx)
	}}
	var regOnce sync.Once
	onReg := func() {
		regOnce.Do(func() {
			d.k8s.registeredOnce.Store(true)
			go d.syncDrain(ctx)
		})
	}
	d.k8s.registered.Store(&onReg)
	go w.Run(ctx)
	go d.reportDrain(ctx, cs, f.K8sNode)
	select {
	case <-first:
	case <-time.After(K8sLabelsTimeout):
		log.Warn("no labels from the Kubernetes node yet; registering without them", "k8s_node", f.K8sNode, "waited", K8sLabelsTimeout.String())
	case <-ctx.Done():
	}
	return nil
}

// syncDrain makes slurmctld's drain follow what Kubernetes asks for
// (k8sDrainReason): drained with that reason unless already drained for a
// reason not ours; a drain of ours (K8sReasonPrefix) lifted once nothing
// asks for it, a preStop's drain included.
func (d *Daemon) syncDrain(ctx context.Context) {
	d.k8s.drainMu.Lock()
	defer d.k8s.drainMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, K8sDrainTimeout)
	defer cancel()
	var conds []corev1.NodeCondition
	if c := d.k8s.conds.Load(); c != nil {
		conds = *c
	}
	want := k8sDrainReason(d.k8s.cordoned.Load(), conds, d.config().Flags.K8sDrainConditions)
	before := d.k8s.asked
	d.k8s.asked = want
	node := d.config().NodeName
	log := d.log.Named("k8s")
	r, err := d.ctld.Node(ctx, node)
	if err != nil {
		log.Error("reading the node's drain failed", "error", err)
		return
	}
	drained := r.NodeState&slurmproto.NodeStateDrain != 0
	ours := strings.HasPrefix(r.Reason, K8sReasonPrefix)
	switch {
	case want == "" && drained && ours:
		if err := d.ctld.Resume(ctx, node); err != nil {
			log.Error("resuming the node failed", "error", err, "reason", r.Reason)
			return
		}
		log.Info("Kubernetes no longer asks for a drain: node resumed", "reason", r.Reason)
	case want == "":
		if before != "" {
			log.Info("Kubernetes no longer asks for a drain; no drain of ours to lift", "was", before)
		}
	case drained && !ours:
		log.Info("Kubernetes asks for a drain; the node is already drained, its reason is kept", "asked", want, "reason", r.Reason)
	case drained && r.Reason == want:
	default:
		if err := d.ctld.Drain(ctx, node, want); err != nil {
			log.Error("draining the node failed", "error", err, "reason", want)
			return
		}
		log.Info("node drained", "reason", want)
	}
}

// reportDrain keeps the Node's DrainCondition equal to slurmctld's drain
// of this node (True with the reason while drained) and its StateCondition
// to the node's state (reason the base state, message base+flags),
// patching only on a change.
func (d *Daemon) reportDrain(ctx context.Context, cs kubernetes.Interface, k8sNode string) {
	log := d.log.Named("k8s")
	t := time.NewTicker(K8sStatePeriod)
	defer t.Stop()
	last := ""
	for {
		rctx, cancel := context.WithTimeout(ctx, K8sDrainTimeout)
		r, err := d.ctld.Node(rctx, d.config().NodeName)
		if err == nil {
			conds := nodeConditions(r)
			if key := fmt.Sprint(conds); key != last {
				now := metav1.Now()
				for i := range conds {
					conds[i].LastHeartbeatTime, conds[i].LastTransitionTime = now, now
				}
				patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
				if _, err = cs.CoreV1().Nodes().PatchStatus(rctx, k8sNode, patch); err == nil {
					last = key
					log.Debug("node conditions", "drained", conds[0].Status, "state", conds[1].Message)
				}
			}
		}
		cancel()
		if err != nil {
			log.Warn("updating the node's Slurm conditions failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// StateCondition is the Node condition that shows the Slurm node's state.
const StateCondition = "SlurmNodeState"

// nodeConditions are the Node conditions for slurmctld's record r (times
// unset): DrainCondition, then StateCondition.
func nodeConditions(r *slurmproto.NodeRecord) []corev1.NodeCondition {
	drain := corev1.NodeCondition{Type: DrainCondition, Status: corev1.ConditionFalse, Reason: "SlurmNotDrained", Message: "the Slurm node is not drained"}
	if r.NodeState&slurmproto.NodeStateDrain != 0 {
		drain.Status, drain.Reason, drain.Message = corev1.ConditionTrue, "SlurmDrained", "drained in Slurm: "+r.Reason
	}
	base := strings.ToLower(slurmproto.NodeBaseName(r.NodeState))
	state := corev1.NodeCondition{Type: StateCondition, Status: corev1.ConditionTrue,
		Reason: "Slurm" + strings.ToUpper(base[:1]) + base[1:], Message: slurmproto.NodeStateName(r.NodeState)}
	return []corev1.NodeCondition{drain, state}
}

// DynamicTopologySince is the first release whose dynamic nodes take a
// topology (`-Z --conf "Topology=<topo>:<switch>..."`, `scontrol update
// topology=`): 25.05; of the releases spoken, 26.05.
const DynamicTopologySince = slurmproto.Version2605

// k8sTopologySpec is a dynamic node's Topology= from its labels for
// release v ("" when there is none or v has no dynamic topology): the
// tiers, coarse to fine, of --k8s-topology-name (topology/tree: the first
// must be a switch slurmctld already has), or the block alone.
func (d *Daemon) k8sTopologySpec(v uint16) string {
	if v < DynamicTopologySince {
		return ""
	}
	d.k8s.mu.Lock()
	p := d.k8s.placement
	d.k8s.mu.Unlock()
	if p == nil {
		return ""
	}
	name := d.config().Flags.K8sTopologyName
	if name == "" {
		name = "default"
	}
	if len(p.Tiers) == 0 {
		if p.Block == "" {
			return ""
		}
		return name + ":" + p.Block
	}
	return p.Spec(name)
}

// updateTopology sends a dynamic node's new topology to slurmctld, as
// `scontrol update nodename=... topology=...` (a registration changes an
// existing dynamic node's topology no more than stock's does).
func (d *Daemon) updateTopology(ctx context.Context) {
	cfg := d.config()
	spec := d.k8sTopologySpec(d.ctld.Version())
	if !cfg.Flags.Dynamic || spec == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, K8sDrainTimeout)
	defer cancel()
	m := slurmproto.NewUpdateNode(cfg.NodeName)
	m.TopologyStr = spec
	log := d.log.Named("k8s")
	if err := d.ctld.UpdateNode(ctx, m); err != nil {
		log.Error("updating the node's topology failed", "topology", spec, "error", err)
		return
	}
	log.Info("node topology updated", "topology", spec)
}

// applyLabels turns a label set into features and placement; it reports
// whether the features changed (slurmctld then needs a registration).
// A label set that gives no topology keeps the last placement.
func (d *Daemon) applyLabels(labels map[string]string, tc k8stopo.Config) bool {
	feats := k8stopo.Features(labels, tc.Features)
	log := d.log.Named("k8s")
	var place *k8stopo.Placement
	if len(tc.Tiers) > 0 {
		p, err := k8stopo.Map(labels, tc)
		if err != nil {
			log.Error("node labels give no topology; keeping the last one", "error", err)
		} else {
			place = &p
		}
	}
	d.k8s.mu.Lock()
	defer d.k8s.mu.Unlock()
	if place != nil {
		if d.k8s.placement == nil || d.k8s.placement.Spec("") != place.Spec("") || d.k8s.placement.Block != place.Block {
			log.Info("node topology from labels", "tiers", strings.Join(place.Tiers, ":"), "block", place.Block)
		}
		d.k8s.placement = place
	}
	if d.k8s.features != nil && slices.Equal(d.k8s.features, feats) {
		return false
	}
	log.Info("node features from labels", "features", strings.Join(feats, ","))
	d.k8s.features = feats
	return true
}

// k8sFeatures is the features registration sends (features_avail and
// features_active): without a node_features plugin slurmctld replaces the
// node's features with them, so the node's own (its NodeName line, or -Z
// --conf's Features=) come first. ok is false without label features.
func (d *Daemon) k8sFeatures(cfg *config.Config) (string, bool) {
	d.k8s.mu.Lock()
	labels := d.k8s.features
	d.k8s.mu.Unlock()
	if labels == nil {
		return "", false
	}
	var own []string
	if cfg.Flags.Dynamic {
		if n, err := slurmconf.ParseNodeLine(cfg.Flags.DynamicConf); err == nil {
			own = n.Features
		}
	} else if cfg.Conf != nil {
		if n, ok := cfg.Conf.Node(cfg.NodeName); ok {
			own = n.Features
		}
	}
	all := slices.Clone(own)
	for _, f := range labels {
		if !slices.Contains(all, f) {
			all = append(all, f)
		}
	}
	return strings.Join(all, ","), true
}
