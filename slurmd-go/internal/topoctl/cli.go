package topoctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/clusterauth"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/k8snode"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/k8stopo"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

const usage = `usage: slurmd-go topology controller [flags]   keep slurmctld's topology.conf in step with Node labels
       slurmd-go topology check JOBID          each node of a job with its pod, Kubernetes node and zone`

// Main runs `slurmd-go topology ARGS...` and returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "controller":
		return controllerMain(ctx, args[1:], stderr)
	case "check":
		return checkMain(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "slurmd-go topology: unknown command %q\n%s\n", args[0], usage)
	return 2
}

func controllerMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("slurmd-go topology controller", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	conf := fs.StringP("conf", "f", envOr("SLURM_CONF", "/etc/slurm/slurm.conf"), "slurm.conf: where slurmctld is and its auth (for the reconfigure)")
	var cfg Config
	var keys []string
	var block string
	fs.StringSliceVar(&keys, "topology-labels", nil, "a vocabulary (kubernetes, coreweave, nebius, aws, gcp, oci, topograph) or label `keys`, coarse to fine; none: detect")
	fs.StringVar(&block, "block-label", "", "the block's label `key` (overrides the vocabulary's)")
	fs.StringVar(&cfg.Plugin, "plugin", "tree", "topology.conf for topology/tree or topology/block")
	fs.IntSliceVar(&cfg.BlockSizes, "block-sizes", nil, "BlockSizes= of topology/block")
	fs.StringVar(&cfg.Format, "format", "conf", "conf: topology.conf; yaml: topology.yaml (25.05+)")
	fs.StringVar(&cfg.TopologyName, "topology-name", "default", "topology.yaml: the name of the tree topology (its blocks: NAME-block)")
	fs.StringVar(&cfg.PodNamespace, "pod-namespace", "", "namespace of the slurmd-go pods (default all)")
	fs.StringVar(&cfg.PodSelector, "pod-selector", "app.kubernetes.io/name=slurmd-go", "label selector of the slurmd-go pods")
	cmRef := fs.String("configmap", "", "the `namespace/name` of the ConfigMap to write topology.conf into")
	fs.StringVar(&cfg.File, "file", "", "the topology.conf `path` slurmctld reads (written atomically)")
	fs.DurationVar(&cfg.MinInterval, "min-interval", DefaultMinInterval, "least time between two reconfigures")
	fs.DurationVar(&cfg.DriftPeriod, "drift-period", DefaultDriftPeriod, "how often the written topology is compared with what was applied")
	noReconf := fs.Bool("no-reconfigure", false, "write only; something else reconfigures slurmctld")
	level := fs.String("log-level", "info", "log level")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "slurmd-go", Output: stderr, Level: hclog.LevelFromString(*level)})
	fail := func(err error) int {
		log.Error("topology controller", "error", err)
		return 1
	}
	var err error
	if cfg.Labels, err = k8stopo.ParseConfig(keys, block, nil); err != nil {
		return fail(err)
	}
	if *cmRef != "" {
		ns, name, ok := strings.Cut(*cmRef, "/")
		if !ok || ns == "" || name == "" {
			return fail(fmt.Errorf("--configmap %q: want namespace/name", *cmRef))
		}
		cfg.ConfigMapNamespace, cfg.ConfigMapName = ns, name
	}
	if *cmRef == "" && cfg.File == "" {
		return fail(fmt.Errorf("nothing to write: give --configmap, --file or both"))
	}
	var rc Reconfigurer
	if !*noReconf {
		if rc, err = ctldClient(*conf, log); err != nil {
			return fail(err)
		}
	}
	cs, err := clientset()
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := New(cfg, cs, rc, log).Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// ctldClient is a slurmctld client built from slurm.conf, as scontrol's:
// the controllers it names, the cluster's auth plugin.
func ctldClient(path string, log hclog.Logger) (*ctld.Client, error) {
	conf, err := slurmconf.Load(path, slurmconf.Options{Version: slurmconf.Lenient})
	if err != nil {
		return nil, err
	}
	hosts, err := config.CtldHosts(conf)
	if err != nil {
		return nil, err
	}
	c := &config.Config{Conf: conf}
	var client *ctld.Client
	a, err := clusterauth.New(clusterauth.Options{
		AuthType: conf.AuthType, ConfFile: conf.File, ClusterName: conf.ClusterName,
		MungeSocket: conf.AuthInfo.Socket, TTL: conf.AuthInfo.TTL, SlurmUserID: conf.SlurmUserID,
		Version: func() uint16 { return client.Version() }, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	client = ctld.New(a, func() ctld.Config {
		return ctld.Config{Hosts: hosts, MessageTimeout: c.MessageTimeout(), HashPolicy: c.HashPolicy()}
	}, log)
	return client, nil
}

// clientset is the API client: $KUBECONFIG, else the pod's account.
func clientset() (kubernetes.Interface, error) {
	rcfg, err := k8snode.Config()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rcfg)
	if err != nil {
		return nil, fmt.Errorf("topoctl: %w", err)
	}
	return cs, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
