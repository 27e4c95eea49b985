// Package probes owns the daemon's Kubernetes probes: /livez (the RPC
// server still accepts connections) and /readyz (registered with
// slurmctld and not refused by it, which also proves authentication works,
// and the step manager present). Readiness means "this node can take
// jobs", not "the process is up" (Slinky #122).
package probes
