//go:build !linux

package stepd

import (
	"fmt"
	"os"
)

// Main reports that the step manager needs Linux (setsid, cgroups,
// per-thread credentials, SO_PEERCRED).
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, "slurmstepd-go runs on Linux only")
	return 2
}
