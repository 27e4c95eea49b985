package flood

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Hold timings.
const (
	holdDialTimeout  = 5 * time.Second        // one connect of a held connection
	holdRetryPause   = 100 * time.Millisecond // after a failed connect
	holdDialParallel = 128                    // concurrent connects while ramping up
)

// Holder keeps N idle connections open to a target: connected, nothing sent, as a slow or
// stuck client would. A daemon closes such a connection when its MessageTimeout expires
// (both slurmd and slurmd-go do); with Maintain the holder then reconnects, so the number held
// stays at N for as long as the hold lasts. Methods are safe for concurrent use.
type Holder struct {
	d        *Dialer
	n        int
	maintain bool

	open         atomic.Int64 // connections established and not yet closed
	serverCloses atomic.Int64 // closed by the daemon (EOF or reset while idle)
	dialFails    Counters     // failed connects by kind

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex        // guards conns
	conns  map[net.Conn]bool // guarded by mu
	rampMu sync.Mutex        // guards ramp
	ramp   time.Duration     // guarded by rampMu: time until open first reached n (0: not yet)
	start  time.Time
}

// HoldStats describes a hold.
type HoldStats struct {
	Wanted       int              `json:"wanted"`
	Established  int64            `json:"established"` // open when measured
	RampSeconds  float64          `json:"ramp_s"`      // until all were open (if they ever were)
	RampComplete bool             `json:"ramp_complete"`
	ServerCloses int64            `json:"server_closes"`
	DialFailures map[string]int64 `json:"dial_failures,omitempty"`
}

// StartHold opens n idle connections with up to holdDialParallel connects at a time and
// returns at once; Wait waits for the ramp.
func StartHold(ctx context.Context, d *Dialer, n int, maintain bool) *Holder {
	h := &Holder{d: d, n: n, maintain: maintain, conns: map[net.Conn]bool{}, start: time.Now()}
	h.ctx, h.cancel = context.WithCancel(ctx)
	sem := make(chan struct{}, holdDialParallel)
	for i := 0; i < n; i++ {
		h.wg.Add(1)
		go h.keep(sem)
	}
	return h
}

// keep holds one connection (and, with maintain, its successors).
func (h *Holder) keep(sem chan struct{}) {
	defer h.wg.Done()
	first := true
	for h.ctx.Err() == nil {
		if first {
			select {
			case sem <- struct{}{}:
			case <-h.ctx.Done():
				return
			}
		}
		c, err := h.d.Dial(h.ctx, time.Now().Add(holdDialTimeout))
		if first {
			<-sem
			first = false
		}
		if err != nil {
			if h.ctx.Err() != nil {
				return
			}
			h.dialFails.Add(classifyDial(err))
			if !sleepCtx(h.ctx, holdRetryPause) {
				return
			}
			continue
		}
		h.mu.Lock()
		h.conns[c] = true
		h.mu.Unlock()
		if h.open.Add(1) == int64(h.n) {
			h.rampMu.Lock()
			if h.ramp == 0 {
				h.ramp = time.Since(h.start)
			}
			h.rampMu.Unlock()
		}
		var b [1]byte
		_, _ = c.Read(b[:]) // returns when the daemon closes it, or Stop does
		h.open.Add(-1)
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
		c.Close()
		if h.ctx.Err() != nil {
			return
		}
		h.serverCloses.Add(1)
		if !h.maintain {
			return
		}
	}
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

// Open is the number of connections open now.
func (h *Holder) Open() int64 { return h.open.Load() }

// WaitRamp waits until all n connections are open or limit has passed.
func (h *Holder) WaitRamp(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for h.open.Load() < int64(h.n) && time.Now().Before(deadline) && h.ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// Stats reports the hold as it is now.
func (h *Holder) Stats() HoldStats {
	h.rampMu.Lock()
	ramp := h.ramp
	h.rampMu.Unlock()
	complete := ramp != 0
	if !complete {
		ramp = time.Since(h.start)
	}
	return HoldStats{
		Wanted:       h.n,
		Established:  h.open.Load(),
		RampSeconds:  ramp.Seconds(),
		RampComplete: complete,
		ServerCloses: h.serverCloses.Load(),
		DialFailures: h.dialFails.Errors(),
	}
}

// Stop closes every held connection and waits for the holders to finish.
func (h *Holder) Stop() {
	h.cancel()
	h.mu.Lock()
	for c := range h.conns {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
	h.mu.Unlock()
	h.wg.Wait()
}
