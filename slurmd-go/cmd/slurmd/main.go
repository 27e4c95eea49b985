// Command slurmd-go is a drop-in replacement for Slurm's slurmd: same flags,
// same slurm.conf, same port. Everything but flag parsing lives in daemon.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/daemon"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/topoctl"
)

func main() {
	// slurmd-go only: `slurmd-go topology ...` and `slurmd-go prestop`
	// (stock slurmd takes no positional arguments, so no flag line can
	// mean these).
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "topology":
			os.Exit(topoctl.Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
		case "prestop":
			os.Exit(daemon.PreStop(context.Background(), os.Args[2:], os.Stderr))
		}
	}
	flags, err := config.ParseFlags(os.Args[0], os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
		os.Exit(1)
	}
	os.Exit(daemon.Main(context.Background(), flags))
}
