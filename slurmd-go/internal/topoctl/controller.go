package topoctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/k8stopo"
)

// SlurmNodeAnnotation on a slurmd-go pod names its Slurm node (the chart
// sets it from node.name); NodeNameLabel "pod" says the Slurm node is
// named as the pod (a StatefulSet's dynamic nodes, `-N $(POD_NAME)`);
// without either it is named as the Kubernetes node (`-N $(K8S_NODE_NAME)`).
const (
	SlurmNodeAnnotation = "tiee.io/slurm-node"
	NodeNameLabel       = "tiee.io/slurm-node-name"
)

// SlurmNode is the Slurm node a slurmd-go pod runs.
func SlurmNode(p *corev1.Pod) string {
	switch {
	case p.Annotations[SlurmNodeAnnotation] != "":
		return p.Annotations[SlurmNodeAnnotation]
	case p.Labels[NodeNameLabel] == "pod":
		return p.Name
	}
	return p.Spec.NodeName
}

// ConfigMapKey is the ConfigMap key holding topology.conf; YAMLKey the
// one holding topology.yaml (Format "yaml").
const (
	ConfigMapKey = "topology.conf"
	YAMLKey      = "topology.yaml"
)

// Named bounds.
const (
	// DefaultMinInterval is the least time between two reconfigures: a
	// relabelling of many Nodes costs slurmctld one.
	DefaultMinInterval = 10 * time.Second
	// DefaultDriftPeriod: how often an edit of the topology by someone
	// else is looked for.
	DefaultDriftPeriod = time.Minute
	// SyncTimeout bounds the informers' first list.
	SyncTimeout = time.Minute
	// ApplyTimeout bounds writing the ConfigMap and the reconfigure.
	ApplyTimeout = 30 * time.Second
)

// Reconfigurer has slurmctld re-read its configuration.
type Reconfigurer interface {
	Reconfigure(ctx context.Context) error
}

// Config says what the controller watches and where it writes.
type Config struct {
	// Labels: the tier and block keys; no tiers means the default
	// vocabulary every Node has complete (k8stopo.DetectAll).
	Labels k8stopo.Config
	// Plugin is "tree" (default) or "block" (topology/block, 23.11+).
	Plugin     string
	BlockSizes []int
	// Format "yaml" writes topology.yaml (25.05+: named topologies, a
	// tree named TopologyName and, where every node has a block, a block
	// topology beside it) instead of topology.conf.
	Format       string
	TopologyName string
	// The slurmd-go pods: namespace ("" all) and label selector.
	PodNamespace, PodSelector string
	// The ConfigMap written (namespace and name; no name: none).
	ConfigMapNamespace, ConfigMapName string
	// File, if set, is the topology.conf slurmctld reads.
	File        string
	MinInterval time.Duration
	// DriftPeriod is how often the file and ConfigMap are compared with
	// what was applied (default DefaultDriftPeriod).
	DriftPeriod time.Duration
}

// Controller keeps slurmctld's topology in step with the Nodes' labels.
type Controller struct {
	cfg Config
	cs  kubernetes.Interface
	rc  Reconfigurer // nil: write only
	log hclog.Logger

	nodes corelisters.NodeLister
	pods  corelisters.PodLister
	kick  chan struct{}

	applied   string // the topology slurmctld was last told of
	lastApply time.Time
	lastErr   string
}

// New returns a controller; rc nil only writes the ConfigMap and file.
func New(cfg Config, cs kubernetes.Interface, rc Reconfigurer, log hclog.Logger) *Controller {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.Plugin == "" {
		cfg.Plugin = "tree"
	}
	if cfg.TopologyName == "" {
		cfg.TopologyName = "default"
	}
	if cfg.DriftPeriod <= 0 {
		cfg.DriftPeriod = DefaultDriftPeriod
	}
	return &Controller{cfg: cfg, cs: cs, rc: rc, log: log.Named("topology"), kick: make(chan struct{}, 1)}
}

// Run watches until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if c.cfg.Plugin != "tree" && c.cfg.Plugin != "block" {
		return fmt.Errorf("topoctl: plugin %q: want tree or block", c.cfg.Plugin)
	}
	if c.cfg.Format != "" && c.cfg.Format != "conf" && c.cfg.Format != "yaml" {
		return fmt.Errorf("topoctl: format %q: want conf or yaml", c.cfg.Format)
	}
	if _, err := labels.Parse(c.cfg.PodSelector); err != nil {
		return fmt.Errorf("topoctl: pod selector %q: %w", c.cfg.PodSelector, err)
	}
	nf := informers.NewSharedInformerFactory(c.cs, 0)
	pf := informers.NewSharedInformerFactoryWithOptions(c.cs, 0, informers.WithNamespace(c.cfg.PodNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = c.cfg.PodSelector }))
	ni, pi := nf.Core().V1().Nodes(), pf.Core().V1().Pods()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poke() },
		UpdateFunc: func(any, any) { c.poke() },
		DeleteFunc: func(any) { c.poke() },
	}
	if _, err := ni.Informer().AddEventHandler(h); err != nil {
		return fmt.Errorf("topoctl: %w", err)
	}
	if _, err := pi.Informer().AddEventHandler(h); err != nil {
		return fmt.Errorf("topoctl: %w", err)
	}
	c.nodes, c.pods = ni.Lister(), pi.Lister()
	nf.Start(ctx.Done())
	pf.Start(ctx.Done())
	defer nf.Shutdown()
	defer pf.Shutdown()
	sctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	ok := cache.WaitForCacheSync(sctx.Done(), ni.Informer().HasSynced, pi.Informer().HasSynced)
	cancel()
	if !ok {
		return fmt.Errorf("topoctl: Nodes and pods not listed within %v", SyncTimeout)
	}
	c.applied = c.current(ctx)
	c.log.Info("watching", "pods", c.cfg.PodNamespace+"/"+c.cfg.PodSelector, "plugin", c.cfg.Plugin,
		"configmap", c.cfg.ConfigMapNamespace+"/"+c.cfg.ConfigMapName, "file", c.cfg.File)
	timer := time.NewTimer(0)
	defer timer.Stop()
	drift := time.NewTicker(c.cfg.DriftPeriod)
	defer drift.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-timer.C:
		case <-drift.C:
			c.checkDrift(ctx)
		}
		if wait := c.sync(ctx); wait > 0 {
			timer.Reset(wait)
		}
	}
}

// checkDrift compares what slurmctld reads (the file, the ConfigMap) with
// what was applied: an edit by someone else is drift, reported and then
// overwritten by the next sync (rate-limited like any change).
func (c *Controller) checkDrift(ctx context.Context) {
	if c.applied == "" {
		return
	}
	var where []string
	if c.cfg.File != "" {
		if b, err := os.ReadFile(c.cfg.File); err != nil || string(b) != c.applied {
			where = append(where, c.cfg.File)
		}
	}
	if c.cfg.ConfigMapName != "" {
		cm, err := c.cs.CoreV1().ConfigMaps(c.cfg.ConfigMapNamespace).Get(ctx, c.cfg.ConfigMapName, metav1.GetOptions{})
		if err != nil || cm.Data[c.key()] != c.applied {
			where = append(where, "ConfigMap "+c.cfg.ConfigMapNamespace+"/"+c.cfg.ConfigMapName)
		}
	}
	if len(where) == 0 {
		return
	}
	c.log.Warn("topology drift: what slurmctld reads differs from the Nodes' labels; rewriting it", "in", strings.Join(where, ", "))
	c.applied = "" // the next sync applies the labels' topology again
}

// key is the ConfigMap key of the file written.
func (c *Controller) key() string {
	if c.cfg.Format == "yaml" {
		return YAMLKey
	}
	return ConfigMapKey
}

func (c *Controller) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// current is the topology already in place (the ConfigMap's, else the
// file's), so that a restarted controller does not reconfigure for
// nothing.
func (c *Controller) current(ctx context.Context) string {
	if c.cfg.ConfigMapName != "" {
		cm, err := c.cs.CoreV1().ConfigMaps(c.cfg.ConfigMapNamespace).Get(ctx, c.cfg.ConfigMapName, metav1.GetOptions{})
		if err == nil {
			if c.cfg.File == "" {
				return cm.Data[c.key()]
			}
			if b, err := os.ReadFile(c.cfg.File); err == nil && string(b) == cm.Data[c.key()] {
				return string(b)
			}
			return ""
		}
	}
	if b, err := os.ReadFile(c.cfg.File); err == nil && c.cfg.ConfigMapName == "" {
		return string(b)
	}
	return ""
}

// sync renders the topology and applies it if it changed; it returns how
// long to wait before trying again (0: until the next change).
func (c *Controller) sync(ctx context.Context) time.Duration {
	conf, err := c.render()
	if err != nil {
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			c.log.Error("topology not written, slurmctld keeps the last one", "error", err)
		}
		return 0
	}
	c.lastErr = ""
	if conf == c.applied {
		c.log.Trace("topology unchanged")
		return 0
	}
	if wait := time.Until(c.lastApply.Add(c.cfg.MinInterval)); wait > 0 {
		c.log.Debug("topology changed, reconfigure held back", "for", wait)
		return wait
	}
	actx, cancel := context.WithTimeout(ctx, ApplyTimeout)
	defer cancel()
	c.lastApply = time.Now()
	if err := c.apply(actx, conf); err != nil {
		c.log.Error("topology not applied, will retry", "error", err, "in", c.cfg.MinInterval)
		return c.cfg.MinInterval
	}
	c.applied = conf
	c.log.Info("topology applied", "switches", strings.Count(conf, "SwitchName="), "blocks", strings.Count(conf, "BlockName="))
	return 0
}

// render lists the pods and Nodes and renders their topology.
func (c *Controller) render() (string, error) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return "", err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return "", err
	}
	members, err := Desired(pods, nodes, c.cfg.Labels)
	if err != nil {
		return "", err
	}
	switch {
	case c.cfg.Format == "yaml":
		return k8stopo.TopologyYAML(members, c.cfg.TopologyName, c.cfg.BlockSizes)
	case c.cfg.Plugin == "block":
		return k8stopo.BlockConf(members, c.cfg.BlockSizes)
	}
	return k8stopo.TreeConf(members)
}

// ErrLabels is Desired's error for Nodes whose labels place no topology.
var ErrLabels = errors.New("topoctl: labels give no topology")

// Desired places every Slurm node that has a scheduled slurmd-go pod by
// its Kubernetes Node's labels. Any node it cannot place is an error (all
// such nodes named): a partial topology would strand the others.
func Desired(pods []*corev1.Pod, nodes []*corev1.Node, cfg k8stopo.Config) ([]k8stopo.Member, error) {
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	type pair struct {
		slurm string
		node  *corev1.Node
	}
	var ps []pair
	var bad []string
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		n := byName[p.Spec.NodeName]
		if n == nil {
			bad = append(bad, fmt.Sprintf("pod %s/%s: no Node %s", p.Namespace, p.Name, p.Spec.NodeName))
			continue
		}
		ps = append(ps, pair{SlurmNode(p), n})
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrLabels, strings.Join(bad, "; "))
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%w: no scheduled slurmd-go pods", ErrLabels)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].slurm < ps[j].slurm })
	if len(cfg.Tiers) == 0 {
		sets := make([]map[string]string, len(ps))
		for i, p := range ps {
			sets[i] = p.node.Labels
		}
		v, ok := k8stopo.DetectAll(sets)
		if !ok {
			return nil, fmt.Errorf("%w: no label vocabulary is complete on every Node (%s)", ErrLabels, nodeNames(ps, func(p pair) string { return p.node.Name }))
		}
		cfg.Vocabulary = v
	}
	var members []k8stopo.Member
	for _, p := range ps {
		pl, err := k8stopo.Map(p.node.Labels, cfg)
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %s (Node %s): %v", p.slurm, p.node.Name, err))
			continue
		}
		members = append(members, k8stopo.Member{Node: p.slurm, Placement: pl})
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrLabels, strings.Join(bad, "; "))
	}
	return members, nil
}

func nodeNames[T any](xs []T, name func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = name(x)
	}
	return strings.Join(s, ", ")
}

// apply writes conf to the ConfigMap and the file, then reconfigures.
func (c *Controller) apply(ctx context.Context, conf string) error {
	if c.cfg.ConfigMapName != "" {
		if err := c.writeConfigMap(ctx, conf); err != nil {
			return err
		}
	}
	if c.cfg.File != "" {
		if err := writeFile(c.cfg.File, conf); err != nil {
			return err
		}
	}
	if c.rc != nil {
		if err := c.rc.Reconfigure(ctx); err != nil {
			return fmt.Errorf("topoctl: %w", err)
		}
	}
	return nil
}

func (c *Controller) writeConfigMap(ctx context.Context, conf string) error {
	api := c.cs.CoreV1().ConfigMaps(c.cfg.ConfigMapNamespace)
	cm, err := api.Get(ctx, c.cfg.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.ConfigMapName, Namespace: c.cfg.ConfigMapNamespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "slurmd-go-topology"}},
			Data: map[string]string{c.key(): conf}}
		if _, err := api.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("topoctl: create ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("topoctl: get ConfigMap %s/%s: %w", c.cfg.ConfigMapNamespace, c.cfg.ConfigMapName, err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[c.key()] = conf
	if _, err := api.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("topoctl: update ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// writeFile replaces path atomically: slurmctld never reads half a file.
func writeFile(path, conf string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".topology-*")
	if err != nil {
		return fmt.Errorf("topoctl: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(conf); err != nil {
		tmp.Close()
		return fmt.Errorf("topoctl: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("topoctl: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("topoctl: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("topoctl: %w", err)
	}
	return nil
}
