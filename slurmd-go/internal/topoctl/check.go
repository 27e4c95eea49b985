package topoctl

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/topoapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// CheckTimeout bounds `topology check`'s queries (scontrol, the API).
const CheckTimeout = 30 * time.Second

// Placed is one node of a job: where it runs and its zone.
type Placed struct {
	Node, Pod, K8sNode, Zone string
}

// Place finds each Slurm node's pod, Kubernetes Node and zone (the value
// of zoneKey on that Node); a node without a pod keeps "-" for those.
func Place(nodes []string, pods []corev1.Pod, k8sNodes []corev1.Node, zoneKey string) []Placed {
	zone := map[string]string{}
	for _, n := range k8sNodes {
		zone[n.Name] = n.Labels[zoneKey]
	}
	byNode := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		byNode[SlurmNode(p)] = p
	}
	out := make([]Placed, len(nodes))
	for i, n := range nodes {
		out[i] = Placed{Node: n, Pod: "-", K8sNode: "-", Zone: "-"}
		if p := byNode[n]; p != nil {
			out[i].Pod, out[i].K8sNode = p.Namespace+"/"+p.Name, p.Spec.NodeName
			if z := zone[p.Spec.NodeName]; z != "" {
				out[i].Zone = z
			}
		}
	}
	return out
}

// Zones are the distinct zones of placed, sorted, each with its nodes.
func Zones(placed []Placed) map[string][]string {
	z := map[string][]string{}
	for _, p := range placed {
		z[p.Zone] = append(z[p.Zone], p.Node)
	}
	return z
}

func checkMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("slurmd-go topology check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	zoneKey := fs.String("zone-label", "topology.kubernetes.io/zone", "the Node label `key` that names a zone")
	podNS := fs.String("pod-namespace", "", "namespace of the slurmd-go pods (default all)")
	podSel := fs.String("pod-selector", "app.kubernetes.io/name=slurmd-go", "label selector of the slurmd-go pods")
	oneZone := fs.Bool("one-zone", false, "the job asked for one zone: exit 1 if it straddles (implied by the job's --switches=1)")
	topoConf := fs.String("topology-conf", "", "zones are the leaf switches of this `topology.conf` (nodes outside Kubernetes) instead of the Nodes' labels")
	scontrol := fs.String("scontrol", "scontrol", "the scontrol to ask for the job's nodes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: slurmd-go topology check [flags] JOBID")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "slurmd-go topology check: %v\n", err)
		return 2
	}
	job := fs.Arg(0)
	nodes, oneSwitch, err := jobNodes(ctx, *scontrol, job)
	if err != nil {
		return fail(err)
	}
	// --switches=1 (what the tiee_topology plugin's job_submit.lua sets for
	// --topology=zone) asks for one leaf switch: one zone.
	*oneZone = *oneZone || oneSwitch
	var placed []Placed
	if *topoConf != "" {
		topo, err := topoapi.LoadTopology(*topoConf)
		if err != nil {
			return fail(err)
		}
		placed = PlaceByConf(nodes, topo)
	} else {
		cs, err := clientset()
		if err != nil {
			return fail(err)
		}
		pods, err := cs.CoreV1().Pods(*podNS).List(ctx, metav1.ListOptions{LabelSelector: *podSel})
		if err != nil {
			return fail(fmt.Errorf("list pods: %w", err))
		}
		k8sNodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fail(fmt.Errorf("list nodes: %w", err))
		}
		placed = Place(nodes, pods.Items, k8sNodes.Items, *zoneKey)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOD\tK8S-NODE\tZONE")
	for _, p := range placed {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Node, p.Pod, p.K8sNode, p.Zone)
	}
	tw.Flush()
	zones := Zones(placed)
	if len(zones) == 1 {
		fmt.Fprintf(stdout, "job %s: %d node(s) in one zone\n", job, len(nodes))
		return 0
	}
	names := make([]string, 0, len(zones))
	for z := range zones {
		names = append(names, z)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, z := range names {
		parts[i] = fmt.Sprintf("%s (%s)", z, hostlist.Compress(zones[z]))
	}
	fmt.Fprintf(stdout, "job %s straddles %d zones: %s\n", job, len(zones), strings.Join(parts, ", "))
	if *oneZone {
		return 1
	}
	return 0
}

// PlaceByConf places nodes by topology.conf: a node's zone is its leaf
// switch ("-" when none has it); there are no pods.
func PlaceByConf(nodes []string, topo *topoapi.Topology) []Placed {
	out := make([]Placed, len(nodes))
	for i, n := range nodes {
		out[i] = Placed{Node: n, Pod: "-", K8sNode: "-", Zone: "-"}
		if z := topo.Zone[n]; z != "" {
			out[i].Zone = z
		}
	}
	return out
}

// jobNodes are the job's nodes, from `scontrol show job -o`, and whether
// the job asked for one leaf switch (Switches=1@...).
func jobNodes(ctx context.Context, scontrol, job string) ([]string, bool, error) {
	out, err := exec.CommandContext(ctx, scontrol, "show", "job", "-o", job).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, false, fmt.Errorf("scontrol show job %s: %w: %s", job, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, false, fmt.Errorf("scontrol show job %s: %w", job, err)
	}
	return parseJobNodes(job, string(out))
}

func parseJobNodes(job, out string) ([]string, bool, error) {
	oneSwitch := false
	var nodes []string
	found := false
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "Switches="); ok {
			n, _, _ := strings.Cut(v, "@")
			oneSwitch = n == "1"
		}
		if v, ok := strings.CutPrefix(f, "NodeList="); ok && !found {
			found = true
			if v == "" || v == "(null)" {
				return nil, false, fmt.Errorf("job %s has no nodes yet", job)
			}
			var err error
			if nodes, err = hostlist.Expand(v); err != nil {
				return nil, false, err
			}
		}
	}
	if !found {
		return nil, false, fmt.Errorf("job %s: no NodeList in scontrol's answer", job)
	}
	return nodes, oneSwitch, nil
}
