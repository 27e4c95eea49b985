// Package topoctl is the cluster topology controller: it watches the
// Kubernetes Nodes and the slurmd-go pods on them (client-go informers),
// turns the Nodes' labels into topology.conf (k8stopo), keeps it in a
// ConfigMap and, where slurmctld reads it, in a file, and has slurmctld
// re-read it (REQUEST_RECONFIGURE), at most once per MinInterval. A label
// set that gives no valid topology is logged and never written: slurmctld
// keeps the last good one.
//
// It also owns `slurmd-go topology ...` (Main): the controller, and
// `topology check`.
package topoctl
