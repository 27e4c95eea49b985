// Package integration holds the real-cluster tests: the shared munged, an unmodified
// Slurm 22.05 slurmctld and client commands, and the node daemons under test
// (bin/slurmd-go, or the stock slurmd with TIEE_SLURMD_IMPL=stock). The tests carry the
// build tag "integration" and need root:
//
//	sudo TIEE_SLURMD_IMPL=stock go test -tags integration -count=1 -v ./slurmd-go/integration/...
//
// The harness is package cluster.
package integration
