package flood

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds one RPC (connect + request + reply): Slurm's default MessageTimeout,
// the time slurmctld's agent waits for a node.
const DefaultTimeout = 10 * time.Second

// Target is one daemon under test, as the client sees it.
type Target struct {
	Dialer *Dialer
	Source Source // request frames, each used once (or Recycled for the no-auth server)
	Want   Want
}

// Progress prints a one-line status to Out every second while a run goes on. Status, if set,
// adds a suffix (the daemon's RSS/threads/fds from the sampler).
type Progress struct {
	Out    io.Writer
	Label  string
	Status func() string
}

func (p *Progress) start(ctx context.Context, rec *Recorder, begin time.Time, inflight *atomic.Int64) func() {
	if p == nil || p.Out == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastOK int64
		last := begin
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				ok := rec.OK()
				rate := float64(ok-lastOK) / now.Sub(last).Seconds()
				lastOK, last = ok, now
				s := ""
				if p.Status != nil {
					s = " " + p.Status()
				}
				fmt.Fprintf(p.Out, "  %-32s %5.1fs ok=%-8d %7.0f/s err=%-6d inflight=%-5d%s\n",
					p.Label, now.Sub(begin).Seconds(), ok, rate, rec.Counters().ErrorTotal(), inflight.Load(), s)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// ClosedConfig is a closed-loop run: VUs virtual users, each looping connect → request →
// reply → close with no think time, as the 5,000-VU test did.
type ClosedConfig struct {
	VUs      int
	Warmup   time.Duration // not measured
	Duration time.Duration // measured window
	Timeout  time.Duration // per RPC; DefaultTimeout if 0
	Progress *Progress
	// OnWindow, if set, is called (on its own goroutine) when the measured window starts
	// (true) and when it ends (false), e.g. to read CPU counters for exactly the window.
	OnWindow func(start bool)
}

// RunClosed runs a closed loop against t. RPCs that complete inside the measured window are
// counted; RPCs cut short by the end of the run are not. If t's Source runs dry, every VU
// stops after its RPC in flight and the window ends there (Extra["source_exhausted"]=1).
func RunClosed(ctx context.Context, t Target, c ClosedConfig) Stats {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	begin := time.Now()
	winStart := begin.Add(c.Warmup)
	winEnd := winStart.Add(c.Duration)
	rec := NewRecorder(begin, c.Warmup+c.Duration)
	runCtx, cancel := context.WithDeadline(ctx, winEnd)
	defer cancel()
	var exhausted atomic.Bool
	var warm Counters
	var used, cut, late atomic.Int64 // frames taken; RPCs cut short by the end of the run; ended after it
	var inflight atomic.Int64
	stopProgress := c.Progress.start(runCtx, rec, begin, &inflight)
	if c.OnWindow != nil {
		t1 := time.AfterFunc(c.Warmup, func() { c.OnWindow(true) })
		t2 := time.AfterFunc(c.Warmup+c.Duration, func() { c.OnWindow(false) })
		defer t1.Stop()
		defer t2.Stop()
	}
	var wg sync.WaitGroup
	for vu := 0; vu < c.VUs; vu++ {
		wg.Add(1)
		go func(vu int) {
			defer wg.Done()
			// The clock check matters when the machine is saturated: runCtx's timer can fire
			// late, and a VU must not keep spending credentials after the window.
			for runCtx.Err() == nil && time.Now().Before(winEnd) {
				frame, ok := t.Source.Next()
				if !ok {
					// The others finish the RPC they have in flight, then stop too.
					exhausted.Store(true)
					return
				}
				used.Add(1)
				inflight.Add(1)
				t0 := time.Now()
				res := RPC(runCtx, t.Dialer, frame, t.Want, t0.Add(c.Timeout))
				t1 := time.Now()
				inflight.Add(-1)
				if runCtx.Err() != nil && res.Kind != OK {
					cut.Add(1)
					return // cut short by the end of the run: not the daemon's failure
				}
				if t1.Before(winStart) {
					warm.Add(res.Kind) // outside the measured window, but never invisible
					continue
				}
				if t1.After(winEnd) {
					late.Add(1)
					continue
				}
				rec.Record(vu, t0, t1, res)
			}
		}(vu)
	}
	wg.Wait()
	stopProgress()
	end := winEnd
	extra := map[string]float64{"vus": float64(c.VUs), "frames_used": float64(used.Load()), "cut_at_end": float64(cut.Load()), "ended_after": float64(late.Load())}
	if exhausted.Load() {
		if now := time.Now(); now.Before(end) {
			end = now
		}
		extra["source_exhausted"] = 1
	}
	window := end.Sub(winStart)
	if window < 0 {
		window = 0
	}
	st := rec.Stats(window)
	st.Extra = extra
	st.Warmup = warm.Errors()
	if n := warm.Get(OK); n > 0 {
		st.Warmup["ok"] = n
	}
	return st
}

// OpenConfig is an open-loop run: requests start at a fixed rate whatever the daemon does,
// and each latency is measured from the moment its request was due (no coordinated
// omission).
type OpenConfig struct {
	Rate        float64 // requests per second
	Warmup      time.Duration
	Duration    time.Duration
	Timeout     time.Duration // per RPC; DefaultTimeout if 0
	MaxInFlight int           // beyond it a due request is skipped and counted (generator overload)
	Progress    *Progress
}

// RunOpen runs an open loop against t. Requests due inside the measured window are counted
// whenever they complete: the run waits up to Timeout for the last ones, so a stalled daemon
// shows as timeouts rather than as missing samples.
func RunOpen(ctx context.Context, t Target, c OpenConfig) Stats {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 20000
	}
	begin := time.Now()
	winStart := begin.Add(c.Warmup)
	winEnd := winStart.Add(c.Duration)
	rec := NewRecorder(begin, c.Warmup+c.Duration+c.Timeout)
	var inflight atomic.Int64
	var skipped, exhausted atomic.Int64
	stopProgress := c.Progress.start(ctx, rec, begin, &inflight)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / c.Rate)
	var i int64
	for ctx.Err() == nil {
		due := begin.Add(time.Duration(i) * interval)
		if !due.Before(winEnd) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		i++
		if inflight.Load() >= int64(c.MaxInFlight) {
			if !due.Before(winStart) {
				skipped.Add(1)
			}
			continue
		}
		frame, ok := t.Source.Next()
		if !ok {
			exhausted.Add(1)
			continue
		}
		counted := !due.Before(winStart)
		inflight.Add(1)
		wg.Add(1)
		go func(n int64, due time.Time) {
			defer wg.Done()
			defer inflight.Add(-1)
			res := RPC(ctx, t.Dialer, frame, t.Want, due.Add(c.Timeout))
			if counted {
				rec.Record(int(n), due, time.Now(), res)
			}
		}(i, due)
	}
	wg.Wait()
	stopProgress()
	st := rec.Stats(c.Duration)
	st.Extra = map[string]float64{
		"rate":              c.Rate,
		"offered":           float64(int64(c.Rate * c.Duration.Seconds())),
		"generator_skipped": float64(skipped.Load()),
		"source_exhausted":  float64(exhausted.Load()),
	}
	return st
}
