// Package gpumock completes go-nvml's mock servers (pkg/nvml/mock/dgxh100,
// dgxa100) into whole machines that package gpu can run against: the calls
// the upstream mock leaves unset (CPU affinity, NVLink state and remote
// ends, PCI bus ids, MIG device handles, fabric info, telemetry, event
// sets) answer as an 8-GPU DGX would, and tests inject XIDs and faults.
//
// It is imported by tests and by the nvmlmock build of the daemon
// (bin/slurmd-go-nvmlmock), never by the production binary. It needs cgo,
// as go-nvml does.
//
// A Machine is safe for use from any goroutine.
package gpumock
