// Command allreduce times a data-parallel training step: a ring all-reduce of a float32
// gradient over TCP between the tasks of one Slurm job step (package bench/internal/ring).
//
//	srun -N4 -n4 allreduce -bytes 16777216 -iters 10 -warmup 1 -rendezvous $HOME/rdv/$SLURM_JOB_ID.$SLURM_STEP_ID \
//	    -node-addrs n1=10.0.0.1,n2=10.0.0.2,n3=10.0.0.3,n4=10.0.0.4
//
// Rank and size come from SLURM_PROCID and SLURM_NTASKS, the node name from SLURMD_NODENAME.
// Each rank listens on an ephemeral port of its node's IP from -node-addrs (127.0.0.1
// without it) and publishes "ip:port\n" as DIR/rank-<r>. Rank 0 prints one JSON line:
//
//	{"ranks":4,"bytes":16777216,"warmup":1,"steps_s":[...],"median_s":...,"min_s":...,"max_s":...,"nodes":[...],"ok":true}
//
// Exit status: 0 done, 1 the run failed (unreachable rank, step timeout, wrong sum), 2 bad
// flags or environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/ring"
)

// start is when the connect timeout starts counting.
var start = time.Now()

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("allreduce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nbytes := fs.Int("bytes", 16<<20, "gradient size in bytes (a multiple of 4 * SLURM_NTASKS)")
	iters := fs.Int("iters", 10, "timed iterations")
	warmup := fs.Int("warmup", 1, "untimed iterations first")
	rdv := fs.String("rendezvous", "", "directory shared by all tasks, for their addresses")
	nodeAddrs := fs.String("node-addrs", "", "NODE=IP,... : each node's IP to listen on (default 127.0.0.1)")
	connectTimeout := fs.Duration("connect-timeout", 60*time.Second, "for the ring to connect, from program start")
	stepTimeout := fs.Duration("step-timeout", 120*time.Second, "for each iteration")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "allreduce: %v\n", err)
		return code
	}
	if fs.NArg() > 0 {
		return fail(2, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	rank, size, node, err := fromEnv(getenv)
	if err != nil {
		return fail(2, err)
	}
	ip, err := listenIP(*nodeAddrs, node)
	if err != nil {
		return fail(2, fmt.Errorf("rank %d (node %s): %w", rank, node, err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := ring.Run(ctx, ring.Config{
		Rank: rank, Size: size, Bytes: *nbytes, Warmup: *warmup, Iters: *iters,
		Rendezvous: *rdv, ListenIP: ip, Node: node,
		ConnectTimeout: *connectTimeout, StepTimeout: *stepTimeout, Start: start,
	})
	if errors.Is(err, ring.ErrConfig) {
		return fail(2, err)
	} else if err != nil {
		return fail(1, err)
	}
	if rank == 0 {
		line, err := res.JSON()
		if err != nil {
			return fail(1, err)
		}
		fmt.Fprintf(stdout, "%s\n", line)
	}
	return 0
}

// fromEnv reads the rank, size and node name Slurm gives each task.
func fromEnv(getenv func(string) string) (rank, size int, node string, err error) {
	num := func(name string) int {
		v := getenv(name)
		n, perr := strconv.Atoi(v)
		switch {
		case err != nil:
		case v == "":
			err = fmt.Errorf("%s is not set (run under srun)", name)
		case perr != nil:
			err = fmt.Errorf("%s=%q is not an integer", name, v)
		}
		return n
	}
	rank, size = num("SLURM_PROCID"), num("SLURM_NTASKS")
	return rank, size, getenv("SLURMD_NODENAME"), err
}

// listenIP is node's IP in nodeAddrs ("n1=10.0.0.1,n2=10.0.0.2"), or 127.0.0.1 without it.
func listenIP(nodeAddrs, node string) (string, error) {
	if nodeAddrs == "" {
		return "127.0.0.1", nil
	}
	ips := map[string]string{}
	for _, kv := range strings.Split(nodeAddrs, ",") {
		name, ip, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || name == "" || net.ParseIP(ip) == nil {
			return "", fmt.Errorf("-node-addrs: %q is not NODE=IP", kv)
		}
		if _, dup := ips[name]; dup {
			return "", fmt.Errorf("-node-addrs: node %s given twice", name)
		}
		ips[name] = ip
	}
	if node == "" {
		return "", errors.New("SLURMD_NODENAME is not set, and -node-addrs needs it")
	}
	ip, ok := ips[node]
	if !ok {
		return "", fmt.Errorf("node %s (SLURMD_NODENAME) is not in -node-addrs %s", node, nodeAddrs)
	}
	return ip, nil
}
