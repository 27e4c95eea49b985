// Command slurmstepd-go is the step manager of slurmd-go: one process per
// job step, started by the daemon with "start" and outliving it.
//
//	slurmstepd-go start   re-parent and run the step manager (spec on stdin)
//	slurmstepd-go serve   the step manager itself (run by start)
//	slurmstepd-go task    internal: become the user and exec a task
//	slurmstepd-go getenv  print the limits and environment (run inside su
//	                      for sbatch --get-user-env, as "slurmstepd getenv")
//	slurmstepd-go su-exec internal: su's setup for --get-user-env
package main

import (
	"os"

	// The MPI plugins' hosts register with stepd from init.
	_ "github.com/tiee-hpc/tiee/slurmd-go/internal/pmix"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepd"
)

func main() {
	os.Exit(stepd.Main(os.Args[1:]))
}
