// Package config turns slurmd's command line and slurm.conf into the one
// resolved Config the daemon runs with.
package config

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

// DefaultConfFile is where Debian's slurmd reads slurm.conf.
const DefaultConfFile = "/etc/slurm/slurm.conf"

// Flags are slurmd 22.05's options ("bcCd:Df:F::GhL:Mn:N:svVZ", --conf,
// --conf-server), kept with the same letters so admins swap the binary only.
type Flags struct {
	ConfFile      string // -f
	NodeName      string // -N
	LogFile       string // -L
	Verbose       int    // -v, repeatable
	Foreground    bool   // -D
	CleanStart    bool   // -c: terminate the steps left by an earlier daemon
	PrintConfig   bool   // -C: print the node's hardware line and exit
	PrintVersion  bool   // -V
	Dynamic       bool   // -Z: register as a dynamic node
	DynamicConf   string // --conf: NodeName line parameters for -Z
	FutureFeature string // -F[feature]: dynamic future node
	ConfServer    string // --conf-server: configless, the files come from slurmctld
	StepdPath     string // -d: accepted for compatibility; our step manager is this binary
	Nice          int    // -n
	BootTime      bool   // -b
	MlockPages    bool   // -M
	SetWD         bool   // -s
	PrintGres     bool   // -G
	ConfFileSet   bool   // -f given (otherwise SLURM_CONF or the default)
	// MetricsAddr is where the Prometheus metrics server listens
	// (--metrics-addr, else $TIEE_METRICS_ADDR; slurmd-go only): "" is off,
	// "on" the documented loopback port, "PORT", "HOST" or "HOST:PORT"
	// (metrics.ResolveAddr).
	MetricsAddr string
	// Kubernetes (slurmd-go only): K8sNode names the pod's Node, whose
	// labels are watched; K8sFeatureLabels are label keys whose values
	// become node features; K8sTopologyLabels is a k8stopo vocabulary
	// name or label keys coarse to fine, K8sBlockLabel the block's key.
	K8sNode          string
	K8sFeatureLabels []string
	// K8sDrainConditions are Node condition types that drain the node
	// with a "k8s:" reason: Ready when not True, any other when True.
	K8sDrainConditions []string
	K8sTopologyLabels  []string
	K8sBlockLabel      string
	// K8sTopologyName is the topology a dynamic node's Topology= names
	// (topology.yaml's, or "default": topology.conf's).
	K8sTopologyName string
}

// MetricsAddrEnv enables the metrics server like --metrics-addr (the flag wins).
const MetricsAddrEnv = "TIEE_METRICS_ADDR"

// ParseFlags parses args with getopt-like rules (-Dvvv works).
func ParseFlags(prog string, args []string) (Flags, error) {
	var f Flags
	fs := pflag.NewFlagSet(prog, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVarP(&f.ConfFile, "conffile", "f", "", "read configuration from `file`")
	fs.StringVarP(&f.NodeName, "nodename", "N", "", "run the daemon for the named node")
	fs.StringVarP(&f.LogFile, "logfile", "L", "", "log messages to the specified `file`")
	fs.CountVarP(&f.Verbose, "verbose", "v", "verbose mode, repeat for more")
	fs.BoolVarP(&f.Foreground, "foreground", "D", false, "run daemon in foreground")
	fs.BoolVarP(&f.CleanStart, "clean", "c", false, "force cleanup of the job steps of an earlier daemon")
	fs.BoolVarP(&f.PrintConfig, "print-config", "C", false, "print node configuration and exit")
	fs.BoolVarP(&f.PrintVersion, "version", "V", false, "print version information and exit")
	fs.BoolVarP(&f.Dynamic, "dynamic", "Z", false, "start as a dynamic node")
	fs.StringVar(&f.DynamicConf, "conf", "", "node parameters for a dynamic node")
	fs.StringVarP(&f.FutureFeature, "future", "F", "", "start as a dynamic future node with this feature")
	fs.Lookup("future").NoOptDefVal = " "
	fs.StringVar(&f.ConfServer, "conf-server", "", "slurmctld to fetch the configuration from")
	fs.StringVarP(&f.StepdPath, "stepd", "d", "", "path of slurmstepd (ignored: the step manager is built in)")
	fs.IntVarP(&f.Nice, "nice", "n", 0, "run at this nice value")
	fs.BoolVarP(&f.BootTime, "boot", "b", false, "report node rebooted when daemon restarted")
	fs.BoolVarP(&f.MlockPages, "mlock", "M", false, "use mlock() to lock the daemon's pages")
	fs.BoolVarP(&f.SetWD, "setwd", "s", false, "change working directory to SlurmdLogFile/SlurmdSpoolDir")
	fs.BoolVarP(&f.PrintGres, "print-gres", "G", false, "print GRES configuration and exit")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on `[host:]port` (alone: 127.0.0.1:9818; slurmd-go only)")
	fs.Lookup("metrics-addr").NoOptDefVal = "on"
	fs.StringVar(&f.K8sNode, "k8s-node", "", "watch this Kubernetes `node`'s labels (slurmd-go only)")
	fs.StringSliceVar(&f.K8sFeatureLabels, "k8s-feature-labels", nil, "label `keys` whose values become node features")
	fs.StringSliceVar(&f.K8sTopologyLabels, "k8s-topology-labels", nil, "a vocabulary (kubernetes, coreweave, nebius, aws, gcp, oci, topograph) or label `keys`, coarse to fine")
	fs.StringVar(&f.K8sBlockLabel, "k8s-block-label", "", "the label `key` of the node's block")
	fs.StringVar(&f.K8sTopologyName, "k8s-topology-name", "default", "the topology a dynamic node's Topology= from its labels names (25.05+)")
	fs.StringSliceVar(&f.K8sDrainConditions, "k8s-drain-conditions", nil, "Node condition `types` that drain the node: Ready when not True, others when True")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: %s [OPTIONS]\n%s", prog, fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	f.ConfFileSet = f.ConfFile != ""
	if f.ConfFile == "" {
		if env := os.Getenv("SLURM_CONF"); env != "" {
			f.ConfFile = env
		} else {
			f.ConfFile = DefaultConfFile
		}
	}
	if f.MetricsAddr == "" {
		f.MetricsAddr = os.Getenv(MetricsAddrEnv)
	}
	if f.FutureFeature == " " {
		f.FutureFeature = ""
	}
	return f, nil
}
