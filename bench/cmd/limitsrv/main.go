// Command limitsrv runs one of the bench's limit servers (see bench/internal/limitsrv):
// -mode noauth answers every request frame with a canned RESPONSE_PING_SLURMD; -mode munge
// decodes the request's credential (and signs a 22.05 reply's) through munged; -mode slurm
// verifies the request's auth/slurm token with the cluster's slurm.key. -release picks the
// header version of the canned reply (22.05 or 24.11). It prints "ready <addr>" on stdout once
// listening and runs until SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tiee-hpc/tiee/bench/internal/limitsrv"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func main() {
	mode := flag.String("mode", "noauth", "noauth, munge or slurm")
	listen := flag.String("listen", "127.0.0.1:0", "RPC listen address")
	stats := flag.String("stats", "", "stats listen address (one JSON line per connection); empty: none")
	release := flag.String("release", "22.05", "Slurm release whose header version the canned reply has (22.05 or 24.11)")
	sock := flag.String("munge-socket", "", "munged socket (default "+munge.DefaultSocket+")")
	key := flag.String("key", "", "slurm.key of the cluster (auth/slurm: -mode slurm, and the signing key otherwise)")
	cluster := flag.String("cluster", "", "ClusterName of the cluster (auth/slurm tokens' cluster claim)")
	flag.Parse()
	if err := run(limitsrv.Mode(*mode), *listen, *stats, *release, *sock, *key, *cluster); err != nil {
		fmt.Fprintln(os.Stderr, "limitsrv:", err)
		os.Exit(1)
	}
}

func run(mode limitsrv.Mode, listen, stats, release, sock, key, cluster string) error {
	version, err := slurmproto.ParseRelease(release)
	if err != nil {
		return err
	}
	a, err := authenticator(key, sock, cluster)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := limitsrv.New(ctx, limitsrv.Config{Mode: mode, Addr: listen, StatsAddr: stats, Auth: a, Version: version})
	if err != nil {
		return err
	}
	fmt.Printf("ready %s\n", s.Addr())
	<-ctx.Done()
	s.Close()
	return nil
}

// authenticator is auth/slurm with the key file, else munge through sock.
func authenticator(key, sock, cluster string) (auth.Authenticator, error) {
	if key == "" {
		// MaxInFlight is left at munge.DefaultMaxInFlight, as in slurmd-go.
		return munge.New(munge.Options{Socket: sock})
	}
	keys, _, err := authslurm.LoadKeys(authslurm.LoadOptions{KeyFile: key})
	if err != nil {
		return nil, err
	}
	return authslurm.New(authslurm.Config{Keys: keys, ClusterName: cluster})
}
