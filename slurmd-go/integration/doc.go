// Package integration holds the real-cluster tests: an unmodified slurmctld and
// client commands of one Slurm release (TIEE_SLURM_RELEASE=22.05|24.11|26.05, with
// TIEE_AUTH=munge|slurm), and the node daemons under test (bin/slurmd-go, or the
// stock slurmd of that release with TIEE_SLURMD_IMPL=stock). The tests carry the
// build tag "integration" and need root:
//
//	sudo TIEE_SLURMD_IMPL=stock TIEE_SLURM_RELEASE=24.11 go test -tags integration -count=1 -v ./slurmd-go/integration/...
//
// The harness is package cluster.
package integration
