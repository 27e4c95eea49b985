package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/limitsrv"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

const (
	msgPing   = slurmproto.RequestPing
	msgStatus = slurmproto.RequestDaemonStatus
	// baselineWindow is how long a daemon is sampled, unloaded, before a hold.
	baselineWindow = time.Second
	// holdSettle lets a daemon finish its per-connection setup after a hold's ramp.
	holdSettle = 300 * time.Millisecond
	// gaugeInterval is how often the number of held connections is read during a probe.
	gaugeInterval = 50 * time.Millisecond
)

// ---- munged's own rate -------------------------------------------------------------------

type mungeRate struct{}

func (mungeRate) Name() string { return "munge-rate" }
func (mungeRate) Title() string {
	return "munged encode and decode rate (the bench's munge client, private munged)"
}

func (mungeRate) Run(env *Env) error {
	if !env.Stack.UsesMunged() {
		return fmt.Errorf("%w: %s signs RPCs with auth/slurm tokens made in-process, with no munged to measure (token-rate measures them)", ErrNotApplicable, env.Stack.Label())
	}
	m := &results.MungeRates{Threads: env.Res.Config.MungedThreads}
	if m.Threads == 0 {
		m.Threads = 2
	}
	cpu0 := procstat.CPU(env.Cluster.Munged.PID())
	payload := env.Request(msgPing).Payload()
	for _, c := range env.Profile.MungeConcurrency {
		creds := make([]string, env.Profile.MungeOps)
		mpid := env.Cluster.Munged.PID()
		enc := measure(env.Ctx, c, len(creds), mpid, func(ctx context.Context, i int) error {
			cred, err := env.Auth.Encode(ctx, payload, auth.UIDAny)
			creds[i] = cred
			return err
		})
		dec := measure(env.Ctx, c, len(creds), mpid, func(ctx context.Context, i int) error {
			if creds[i] == "" {
				return errors.New("no credential")
			}
			_, err := env.Auth.Decode(ctx, creds[i])
			return err
		})
		m.Encode = append(m.Encode, enc)
		m.Decode = append(m.Decode, dec)
		env.Logf("  munged c=%-3d encode %7.0f/s (%.3f ms)  decode %7.0f/s (%.3f ms)",
			c, enc.Rate, enc.MeanMs, dec.Rate, dec.MeanMs)
		if enc.Errors+dec.Errors > 0 {
			return fmt.Errorf("munged: %d encode and %d decode errors at concurrency %d", enc.Errors, dec.Errors, c)
		}
	}
	m.MungedCPU = (procstat.CPU(env.Cluster.Munged.PID()) - cpu0).Seconds()
	env.Res.Munge = m
	return env.Ctx.Err()
}

// ---- auth/slurm tokens' own rate ---------------------------------------------------------

type tokenRate struct{}

func (tokenRate) Name() string { return "token-rate" }
func (tokenRate) Title() string {
	return "auth/slurm token encode and verify rate (slurmd-go's authslurm, in the bench process)"
}

// Run measures what auth/slurm costs per RPC where munge-rate measures munged: the bench's
// Auth (authslurm with the cluster's slurm.key, the code slurmd-go verifies with) makes
// REQUEST_PING tokens and verifies them, at each concurrency.
func (tokenRate) Run(env *Env) error {
	if env.Stack.UsesMunged() {
		return fmt.Errorf("%w: %s signs RPCs through munged (munge-rate measures it)", ErrNotApplicable, env.Stack.Label())
	}
	tr := &results.TokenRates{}
	payload := env.Request(msgPing).Payload()
	n := env.Profile.TokenOps
	for _, c := range env.Profile.MungeConcurrency {
		toks := make([]string, n)
		enc := measure(env.Ctx, c, n, 0, func(ctx context.Context, i int) error {
			tok, err := env.Auth.Encode(ctx, payload, auth.UIDAny)
			toks[i] = tok
			return err
		})
		dec := measure(env.Ctx, c, n, 0, func(ctx context.Context, i int) error {
			if toks[i] == "" {
				return errors.New("no token")
			}
			cr, err := env.Auth.Decode(ctx, toks[i])
			if err == nil && !bytes.Equal(cr.Payload, payload) {
				err = errors.New("token payload differs")
			}
			return err
		})
		tr.Encode = append(tr.Encode, enc)
		tr.Decode = append(tr.Decode, dec)
		if tr.TokenBytes == 0 && toks[0] != "" {
			tr.TokenBytes = len(toks[0])
		}
		env.Logf("  tokens c=%-3d encode %8.0f/s (%.1f µs CPU)  verify %8.0f/s (%.1f µs CPU)",
			c, enc.Rate, enc.CallerCPUUS, dec.Rate, dec.CallerCPUUS)
		if enc.Errors+dec.Errors > 0 {
			return fmt.Errorf("tokens: %d encode and %d verify errors at concurrency %d", enc.Errors, dec.Errors, c)
		}
	}
	env.Res.Tokens = tr
	return env.Ctx.Err()
}

// measure runs f(i) for i in [0,n) on c workers and times it, with the CPU it cost this
// process and munged (pid mungedPID; 0: none).
func measure(ctx context.Context, c, n, mungedPID int, f func(context.Context, int) error) results.RatePoint {
	var next, errs atomic.Int64
	var sumNS atomic.Int64
	mungedCPU := func() time.Duration {
		if mungedPID == 0 {
			return 0
		}
		return procstat.CPU(mungedPID)
	}
	self0, munged0 := procstat.CPU(os.Getpid()), mungedCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := f(ctx, i); err != nil {
					errs.Add(1)
				}
				sumNS.Add(int64(time.Since(t0)))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	p := results.RatePoint{Concurrency: c, Ops: n, Seconds: el.Seconds(), Errors: int(errs.Load())}
	if el > 0 {
		p.Rate = float64(n) / el.Seconds()
	}
	if n > 0 {
		p.MeanMs = float64(sumNS.Load()) / float64(n) / 1e6
		p.CallerCPUUS = float64((procstat.CPU(os.Getpid()) - self0).Microseconds()) / float64(n)
		p.MungedCPUUS = float64((mungedCPU() - munged0).Microseconds()) / float64(n)
	}
	return p
}

// ---- idle footprint ----------------------------------------------------------------------

type idle struct{ when string }

func (i idle) Name() string  { return "idle-" + i.when }
func (i idle) Title() string { return "Idle footprint (" + i.when + "): RSS, threads, descriptors" }

func (i idle) Run(env *Env) error {
	var ss []*procstat.Sampler
	for _, t := range env.Targets {
		ss = append(ss, env.sampler(t))
	}
	if !sleepCtx(env.Ctx, env.Profile.IdleSample) {
		return env.Ctx.Err()
	}
	for k, t := range env.Targets {
		idle := results.Idle{Target: t.Name, When: i.when, Series: ss[k].Stop()}
		if m, err := procstat.ReadMem(t.PID); err == nil {
			idle.Mem = &m
		} else {
			env.Logf("  %s: no memory breakdown: %v", t.Name, err)
		}
		env.Res.Idle = append(env.Res.Idle, idle)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ---- holds -------------------------------------------------------------------------------

type hold struct{}

func (hold) Name() string { return "hold" }
func (hold) Title() string {
	return "Idle connections held: daemon memory per connection, ping latency during the hold"
}

func (hold) Run(env *Env) error {
	for _, n := range env.Profile.Holds {
		for _, t := range env.Targets {
			r, err := runHold(env, t, n)
			if err != nil {
				return fmt.Errorf("hold %d on %s: %w", n, t.Name, err)
			}
			env.Res.Holds = append(env.Res.Holds, r)
			env.Logf("  hold %-5d %-14s held=%-5d ramp=%.1fs rss %+.1f MiB (%.2f KiB/conn) probe p50=%.1fms p99=%.1fms errors=%d",
				n, t.Name, r.Hold.Established, r.Hold.RampSeconds,
				float64(r.During.RSSMedianKB-r.Baseline.RSSMedianKB)/1024, r.PerConnKB,
				r.Probe.LatencyAll.P50Ms, r.Probe.LatencyAll.P99Ms, r.Probe.ErrorTotal)
		}
	}
	return nil
}

func runHold(env *Env, t *Target, n int) (results.HoldRun, error) {
	p := env.Profile
	r := results.HoldRun{Target: t.Name, Conns: n}
	probes := int(p.HoldProbeRate*p.HoldProbe.Seconds()) + 1
	src, err := env.source(t, msgPing, probes+10)
	if err != nil {
		return r, err
	}
	s := env.sampler(t)
	defer s.Stop()
	if !sleepCtx(env.Ctx, baselineWindow) {
		return r, env.Ctx.Err()
	}
	r.Baseline = s.Since(0)
	km := kernelNow()
	h := flood.StartHold(env.Ctx, t.Dialer, n, true)
	h.WaitRamp(p.HoldRamp)
	sleepCtx(env.Ctx, holdSettle)
	mark := s.Mark()
	held := gauge(h)
	want, err := env.want(msgPing)
	if err != nil {
		h.Stop()
		return r, err
	}
	r.Probe = flood.RunOpen(env.Ctx, flood.Target{Dialer: t.Dialer, Source: src, Want: want}, flood.OpenConfig{
		Rate: p.HoldProbeRate, Duration: p.HoldProbe, Timeout: p.RPCTimeout,
		Progress: env.progress(fmt.Sprintf("hold %d %s", n, t.Name), s),
	})
	r.During = s.Since(mark)
	r.Hold = h.Stats()
	r.Hold.Established = held()
	h.Stop()
	if err := sourceErr(src); err != nil {
		return r, err
	}
	r.Kernel = kernelSince(km)
	if r.Hold.Established > 0 {
		r.PerConnKB = float64(r.During.RSSMedianKB-r.Baseline.RSSMedianKB) / float64(r.Hold.Established)
	}
	if fds := r.During.FDsPeak - r.Baseline.FDsLast; fds > 0 {
		r.PerFDKB = float64(r.During.RSSMedianKB-r.Baseline.RSSMedianKB) / float64(fds)
	}
	env.settle(t, r.Baseline.FDsLast)
	return r, env.Ctx.Err()
}

// gauge reads h.Open() every gaugeInterval until the returned func is called, which returns
// the median reading.
func gauge(h *flood.Holder) func() int64 {
	done := make(chan struct{})
	var mu sync.Mutex
	var vals []int64
	go func() {
		t := time.NewTicker(gaugeInterval)
		defer t.Stop()
		for {
			mu.Lock()
			vals = append(vals, h.Open())
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		vals = append(vals, h.Open())
		sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
		return vals[len(vals)/2]
	}
}

// ---- closed loop -------------------------------------------------------------------------

type closedLoop struct{ msg slurmproto.MsgType }

func (c closedLoop) Name() string {
	if c.msg == msgStatus {
		return "status-closed"
	}
	return "ping-closed"
}

func (c closedLoop) Title() string {
	if c.msg == msgStatus {
		return "REQUEST_DAEMON_STATUS (a reply with a body), closed loop, daemons only"
	}
	return "REQUEST_PING, closed loop, VU sweep"
}

func (c closedLoop) Run(env *Env) error {
	levels := env.Profile.VUs
	if c.msg == msgStatus {
		levels = env.Profile.StatusVUs
	}
	for _, vus := range levels {
		for _, t := range env.Targets {
			if c.msg == msgStatus && t.Kind != results.KindDaemon {
				continue // the limit servers answer pings only
			}
			r, err := runClosed(env, t, c.msg, vus)
			if err != nil {
				return fmt.Errorf("%v vus=%d on %s: %w", c.msg, vus, t.Name, err)
			}
			env.Res.Closed = append(env.Res.Closed, r)
			env.Logf("  %-22s vus=%-5d %-14s %8.0f/s p50=%7.2fms p99=%8.2fms errors=%d (protocol %d) rss peak %.1f MiB thr peak %d",
				r.Msg, vus, t.Name, r.Stats.Throughput, r.Stats.Latency.P50Ms, r.Stats.Latency.P99Ms,
				r.Stats.ErrorTotal, r.Stats.Protocol, float64(r.Daemon.RSSPeakKB)/1024, r.Daemon.ThreadsPeak)
		}
	}
	return nil
}

func runClosed(env *Env, t *Target, msg slurmproto.MsgType, vus int) (results.ClosedRun, error) {
	p := env.Profile
	r := results.ClosedRun{Target: t.Name, Msg: msg.String(), VUs: vus}
	src, err := env.source(t, msg, env.credsFor(p.Warmup+p.Duration, vus))
	if err != nil {
		return r, err
	}
	want, err := env.want(msg)
	if err != nil {
		return r, err
	}
	base, _ := procstat.Read(t.PID)
	var lim0 limitsrv.Stats
	if t.StatsAddr != "" {
		if lim0, err = limitsrv.FetchStats(t.StatsAddr); err != nil {
			return r, err
		}
	}
	s := env.sampler(t)
	km := kernelNow()
	// CPU is read at the edges of the measured window.
	var mu sync.Mutex
	var edges [2]*cpuMark
	onWindow := func(start bool) {
		m := env.cpuNow(t)
		mu.Lock()
		defer mu.Unlock()
		if start {
			edges[0] = &m
		} else if edges[1] == nil {
			edges[1] = &m
		}
	}
	r.Stats = flood.RunClosed(env.Ctx, flood.Target{Dialer: t.Dialer, Source: src, Want: want}, flood.ClosedConfig{
		VUs: vus, Warmup: p.Warmup, Duration: p.Duration, Timeout: p.RPCTimeout, OnWindow: onWindow,
		Progress: env.progress(fmt.Sprintf("%s vus=%d %s", shortMsg(msg), vus, t.Name), s),
	})
	onWindow(false) // if the window ended early (credentials ran out) or the timer has not fired yet
	mu.Lock()
	if edges[0] != nil {
		r.CPU = edges[1].since(*edges[0])
	}
	mu.Unlock()
	r.Daemon = s.Stop()
	r.Kernel = kernelSince(km)
	if t.StatsAddr != "" {
		lim1, err := limitsrv.FetchStats(t.StatsAddr)
		if err != nil {
			return r, err
		}
		d := limitsrv.Stats{Requests: lim1.Requests - lim0.Requests, Failures: lim1.Failures - lim0.Failures,
			HandleNS: lim1.HandleNS - lim0.HandleNS, DecodeNS: lim1.DecodeNS - lim0.DecodeNS,
			EncodeNS: lim1.EncodeNS - lim0.EncodeNS, TotalConns: lim1.TotalConns - lim0.TotalConns}
		r.Limit = &d
	}
	if err := sourceErr(src); err != nil {
		return r, err
	}
	if r.Stats.Extra["source_exhausted"] > 0 {
		env.Res.Notes = append(env.Res.Notes, fmt.Sprintf("%s vus=%d on %s ran out of pre-made credentials after %.1fs of %.1fs",
			r.Msg, vus, t.Name, r.Stats.Window, p.Duration.Seconds()))
	}
	env.settle(t, base.FDs)
	return r, env.Ctx.Err()
}

func shortMsg(t slurmproto.MsgType) string {
	if t == msgStatus {
		return "status"
	}
	return "ping"
}

// ---- open loop ---------------------------------------------------------------------------

type openLoop struct{}

func (openLoop) Name() string { return "open-loop" }
func (openLoop) Title() string {
	return "REQUEST_PING open loop at a fixed fraction of stock's best rate, with idle connections held"
}

func (openLoop) Run(env *Env) error {
	p := env.Profile
	best := env.Res.BestClosed(results.TargetStock, msgPing.String())
	if best == nil || best.Stats.Throughput <= 0 {
		return errors.New("needs stock's closed-loop REQUEST_PING rate (scenario ping-closed)")
	}
	rate := best.Stats.Throughput * p.OpenRateFraction
	for _, t := range env.Targets {
		r, err := runOpen(env, t, rate)
		if err != nil {
			return fmt.Errorf("open loop on %s: %w", t.Name, err)
		}
		env.Res.Open = append(env.Res.Open, r)
		env.Logf("  open %.0f/s held=%d %-14s ok=%d p50=%.2fms p99=%.2fms p99(all)=%.2fms errors=%d",
			rate, r.Hold.Established, t.Name, r.Stats.OK, r.Stats.Latency.P50Ms, r.Stats.Latency.P99Ms,
			r.Stats.LatencyAll.P99Ms, r.Stats.ErrorTotal)
	}
	return nil
}

func runOpen(env *Env, t *Target, rate float64) (results.OpenRun, error) {
	p := env.Profile
	r := results.OpenRun{Target: t.Name, Rate: rate, Held: p.OpenHeld}
	need := int(rate*(p.Warmup+p.OpenDuration).Seconds()*1.1) + 50
	src, err := env.source(t, msgPing, need)
	if err != nil {
		return r, err
	}
	want, err := env.want(msgPing)
	if err != nil {
		return r, err
	}
	base, _ := procstat.Read(t.PID)
	s := env.sampler(t)
	cm := env.cpuNow(t)
	km := kernelNow()
	h := flood.StartHold(env.Ctx, t.Dialer, p.OpenHeld, true)
	h.WaitRamp(p.HoldRamp)
	sleepCtx(env.Ctx, holdSettle)
	held := gauge(h)
	r.Stats = flood.RunOpen(env.Ctx, flood.Target{Dialer: t.Dialer, Source: src, Want: want}, flood.OpenConfig{
		Rate: rate, Warmup: p.Warmup, Duration: p.OpenDuration, Timeout: p.RPCTimeout,
		MaxInFlight: openInFlight(p.OpenHeld),
		Progress:    env.progress(fmt.Sprintf("open %.0f/s %s", rate, t.Name), s),
	})
	r.Hold = h.Stats()
	r.Hold.Established = held()
	h.Stop()
	r.CPU = env.cpuSince(t, cm)
	r.Daemon = s.Stop()
	r.Kernel = kernelSince(km)
	if err := sourceErr(src); err != nil {
		return r, err
	}
	env.settle(t, base.FDs)
	return r, env.Ctx.Err()
}

// openInFlight bounds an open loop's concurrent requests by this process's descriptor limit,
// less the held connections and a reserve: past it a due request is counted as skipped by
// the generator instead of failing on EMFILE.
func openInFlight(held int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 10000
	}
	return max(1000, int(rl.Cur)-held-2000)
}
