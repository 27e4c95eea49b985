package k8snode

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Config returns the API client config: $KUBECONFIG when set, else the
// pod's service account (in-cluster).
func Config() (*rest.Config, error) {
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			return nil, fmt.Errorf("k8snode: kubeconfig %s: %w", kc, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("k8snode: not in a pod and no KUBECONFIG: %w", err)
	}
	return c, nil
}

// Watcher delivers the labels of one Node.
type Watcher struct {
	Node   string
	Client kubernetes.Interface
	Log    hclog.Logger
	// OnLabels gets each label set that differs from the last one
	// delivered (a copy: the handler may keep it).
	OnLabels func(map[string]string)
	// OnCordon, if set, gets spec.unschedulable whenever it changes
	// (first delivery included).
	OnCordon func(cordoned bool)
	// OnConditions, if set, gets the Node's conditions whenever the
	// status or reason of one changes (first delivery included).
	OnConditions func([]corev1.NodeCondition)

	mu       sync.Mutex
	last     map[string]string
	seen     bool
	cordoned bool
	conds    string // type=status/reason of each condition
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	// The typed client, not its REST client: the fake clientset of the
	// unit tests has none.
	sel := fields.OneTermEqualSelector("metadata.name", w.Node).String()
	nodes := w.Client.CoreV1().Nodes()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return nodes.Watch(ctx, o)
		},
	}
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Node{},
		// No resync: deliver drops a Node whose labels and cordon did not change.
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.deliver(o) },
			UpdateFunc: func(_, o any) { w.deliver(o) },
			DeleteFunc: func(any) { w.Log.Warn("the Kubernetes node is gone; keeping its last labels", "k8s_node", w.Node) },
		},
	})
	w.Log.Info("watching the Kubernetes node", "k8s_node", w.Node)
	inf.RunWithContext(ctx)
}

func (w *Watcher) deliver(o any) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	w.mu.Lock()
	first := !w.seen
	labelsChanged := first || !maps.Equal(w.last, n.Labels)
	cordonChanged := first || w.cordoned != n.Spec.Unschedulable
	conds := conditionsKey(n.Status.Conditions)
	condsChanged := first || w.conds != conds
	w.last, w.seen, w.cordoned, w.conds = maps.Clone(n.Labels), true, n.Spec.Unschedulable, conds
	labels := maps.Clone(n.Labels)
	w.mu.Unlock()
	if labelsChanged {
		w.Log.Debug("node labels", "k8s_node", w.Node, "count", len(labels))
		w.OnLabels(labels)
	}
	if cordonChanged && w.OnCordon != nil {
		w.OnCordon(n.Spec.Unschedulable)
	}
	if condsChanged && w.OnConditions != nil {
		w.OnConditions(slices.Clone(n.Status.Conditions))
	}
}

// conditionsKey ignores heartbeat times: the kubelet renews them every
// few seconds.
func conditionsKey(cs []corev1.NodeCondition) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s=%s/%s;", c.Type, c.Status, c.Reason)
	}
	return b.String()
}
