// Command limitsrv runs one of the bench's two limit servers (see bench/internal/limitsrv):
// -mode noauth answers every request frame with a canned RESPONSE_PING_SLURMD; -mode munge
// decodes the request's credential and encodes the reply's through munged. It prints
// "ready <addr>" on stdout once listening and runs until SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tiee-hpc/tiee/bench/internal/limitsrv"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
)

func main() {
	mode := flag.String("mode", "noauth", "noauth or munge")
	listen := flag.String("listen", "127.0.0.1:0", "RPC listen address")
	stats := flag.String("stats", "", "stats listen address (one JSON line per connection); empty: none")
	sock := flag.String("munge-socket", "", "munged socket (default "+munge.DefaultSocket+")")
	flag.Parse()
	// MaxInFlight is left at munge.DefaultMaxInFlight, as in slurmd-go.
	m, err := munge.New(munge.Options{Socket: *sock})
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitsrv:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := limitsrv.New(ctx, limitsrv.Mode(*mode), *listen, *stats, m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitsrv:", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", s.Addr())
	<-ctx.Done()
	s.Close()
}
