// Command rpcflood is the bench's Slurm RPC load generator on its own, for ad-hoc runs
// against any slurmd (benchrun drives the same code for the scenarios).
//
//	rpcflood -target 127.0.0.1:6818 -mode closed -vus 256 -duration 10s -pid $(pidof slurmd)
//	rpcflood -target 127.0.0.1:6818 -mode open -rate 2000 -duration 10s -hold 1000
//	rpcflood -target 127.0.0.1:6818 -mode hold -hold 5000 -duration 5s -rate 10
//
//	rpcflood -target 127.0.0.1:6818 -release 24.11 -key /tmp/c/slurm.key -cluster c -mode closed
//
// Credentials are real munge credentials made before the timed phase (-creds of them, each
// used once); a run that uses them all stops early and says so. With -key (auth/slurm, 24.11),
// each request gets a fresh HS256 token minted as it is sent. The summary goes to stderr,
// progress lines too (every second), and the raw figures as JSON to stdout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

type output struct {
	Mode   string           `json:"mode"`
	Target string           `json:"target"`
	Msg    string           `json:"msg"`
	Creds  flood.FillStats  `json:"creds"`
	Stats  flood.Stats      `json:"stats"`
	Hold   *flood.HoldStats `json:"hold,omitempty"`
	Daemon *procstat.Series `json:"daemon,omitempty"`
}

func main() {
	target := flag.String("target", "127.0.0.1:6818", "daemon address")
	mode := flag.String("mode", "closed", "closed, open or hold")
	msg := flag.String("msg", "ping", "ping (REQUEST_PING) or status (REQUEST_DAEMON_STATUS)")
	vus := flag.Int("vus", 16, "closed: virtual users")
	rate := flag.Float64("rate", 100, "open: requests/s; hold: probe pings/s")
	warmup := flag.Duration("warmup", time.Second, "unmeasured warm-up (closed, open)")
	duration := flag.Duration("duration", 5*time.Second, "measured window")
	hold := flag.Int("hold", 0, "idle connections to hold open (open, hold)")
	timeout := flag.Duration("timeout", flood.DefaultTimeout, "per-RPC timeout")
	creds := flag.Int("creds", 20000, "credentials to make before the timed phase")
	recycle := flag.Bool("recycle", false, "reuse 64 credentials round robin (only for servers that never decode them)")
	sock := flag.String("munge-socket", "", "munged socket (default "+munge.DefaultSocket+")")
	release := flag.String("release", "22.05", "Slurm release of the daemon: the requests' header version (22.05 or 24.11)")
	key := flag.String("key", "", "auth/slurm: the cluster's slurm.key (tokens instead of munge credentials)")
	cluster := flag.String("cluster", "", "auth/slurm: the cluster's ClusterName")
	pid := flag.Int("pid", 0, "daemon pid to sample (RSS, threads, fds every 50 ms)")
	sources := flag.Int("sources", 1, "loopback source addresses 127.0.0.1..N (see bench/internal/runner.DefaultSources)")
	nofile := flag.Uint64("nofile", 65536, "RLIMIT_NOFILE to set")
	flag.Parse()
	if err := run(*target, *mode, *msg, *vus, *rate, *warmup, *duration, *hold, *timeout, *creds, *recycle,
		*sock, *release, *key, *cluster, *pid, *sources, *nofile); err != nil {
		fmt.Fprintln(os.Stderr, "rpcflood:", err)
		os.Exit(1)
	}
}

func run(target, mode, msg string, vus int, rate float64, warmup, duration time.Duration, hold int,
	timeout time.Duration, nCreds int, recycle bool, sock, release, key, cluster string, pid, sources int, nofile uint64) error {
	if _, err := launch.RaiseNofile(nofile); err != nil {
		fmt.Fprintln(os.Stderr, "rpcflood: warning:", err)
	}
	t := slurmproto.RequestPing
	if msg == "status" {
		t = slurmproto.RequestDaemonStatus
	}
	version, err := slurmproto.ParseRelease(release)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := flood.NewDialer(target, sources)
	if err != nil {
		return err
	}
	var src flood.Source
	var fs flood.FillStats
	req := flood.Request{Type: t, Version: version, Plugin: slurmproto.AuthPluginMunge}
	if key != "" {
		keys, _, err := authslurm.LoadKeys(authslurm.LoadOptions{KeyFile: key})
		if err != nil {
			return err
		}
		a, err := authslurm.New(authslurm.Config{Keys: keys, ClusterName: cluster, Version: func() uint16 { return version }})
		if err != nil {
			return err
		}
		req.Plugin = slurmproto.AuthPluginSlurm
		src = flood.NewMinter(req, a)
		fmt.Fprintln(os.Stderr, "auth/slurm: a fresh token per request, minted as it is sent")
	} else {
		m, err := munge.New(munge.Options{Socket: sock, TTL: -1, MaxInFlight: 256})
		if err != nil {
			return err
		}
		pool := flood.NewPool(req)
		if recycle {
			nCreds = 64
		}
		fmt.Fprintf(os.Stderr, "making %d credentials...\n", nCreds)
		if fs, err = pool.Fill(ctx, m, nCreds, 16); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "made %d in %.2fs (%.0f/s, not part of any timing)\n", fs.Made, fs.Duration.Seconds(), fs.Rate())
		src = pool
		if recycle {
			var frames [][]byte
			for f, ok := pool.Next(); ok; f, ok = pool.Next() {
				frames = append(frames, f)
			}
			src = flood.NewRecycled(frames)
		}
	}
	want, err := flood.WantFor(req)
	if err != nil {
		return err
	}
	out := output{Mode: mode, Target: target, Msg: t.String(), Creds: fs}
	var s *procstat.Sampler
	prog := &flood.Progress{Out: os.Stderr, Label: mode}
	if pid > 0 {
		s = procstat.Start(pid, procstat.DefaultInterval)
		prog.Status = func() string {
			l := s.Last()
			return fmt.Sprintf("rss=%.1fMiB thr=%d fds=%d", float64(l.RSSKB)/1024, l.Threads, l.FDs)
		}
	}
	var h *flood.Holder
	if hold > 0 {
		h = flood.StartHold(ctx, d, hold, true)
		h.WaitRamp(10 * time.Second)
		hs := h.Stats()
		fmt.Fprintf(os.Stderr, "holding %d of %d idle connections (ramp %.2fs)\n", hs.Established, hold, hs.RampSeconds)
	}
	ft := flood.Target{Dialer: d, Source: src, Want: want}
	switch mode {
	case "closed":
		out.Stats = flood.RunClosed(ctx, ft, flood.ClosedConfig{VUs: vus, Warmup: warmup, Duration: duration, Timeout: timeout, Progress: prog})
	case "open":
		out.Stats = flood.RunOpen(ctx, ft, flood.OpenConfig{Rate: rate, Warmup: warmup, Duration: duration, Timeout: timeout, Progress: prog})
	case "hold":
		if h == nil {
			return fmt.Errorf("-mode hold needs -hold N")
		}
		out.Stats = flood.RunOpen(ctx, ft, flood.OpenConfig{Rate: rate, Duration: duration, Timeout: timeout, Progress: prog})
	default:
		return fmt.Errorf("-mode %q: want closed, open or hold", mode)
	}
	if h != nil {
		hs := h.Stats()
		out.Hold = &hs
		h.Stop()
	}
	if s != nil {
		se := s.Stop()
		out.Daemon = &se
	}
	st := out.Stats
	fmt.Fprintf(os.Stderr, "%s %s: %d ok in %.1fs = %.0f/s; latency ms p50 %.2f p90 %.2f p99 %.2f max %.2f; errors %v (protocol %d)\n",
		mode, t, st.OK, st.Window, st.Throughput, st.Latency.P50Ms, st.Latency.P90Ms, st.Latency.P99Ms, st.Latency.MaxMs, st.Errors, st.Protocol)
	if out.Daemon != nil {
		fmt.Fprintf(os.Stderr, "daemon: rss median %.1f MiB peak %.1f MiB, threads peak %d, fds peak %d, cpu %.2fs\n",
			float64(out.Daemon.RSSMedianKB)/1024, float64(out.Daemon.RSSPeakKB)/1024, out.Daemon.ThreadsPeak, out.Daemon.FDsPeak, out.Daemon.CPUSeconds)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}
