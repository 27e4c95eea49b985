package flood

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Encoder makes munge credentials (auth.Authenticator's Encode; *munge.Munge in practice).
type Encoder interface {
	Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error)
}

// Source hands out complete request frames. Safe for concurrent use.
type Source interface {
	// Next returns the next frame to send, or false when none is left.
	Next() ([]byte, bool)
}

// Pool is a FIFO of pre-encoded request frames of one message type, each carrying its own
// munge credential and each handed out once: munged refuses a credential it has decoded
// before (EMUNGE_CRED_REPLAYED), and a real client never reuses one. Credentials are made by
// Fill, outside any timed phase. Safe for concurrent use.
type Pool struct {
	Type slurmproto.MsgType

	mu     sync.Mutex // guards frames, head
	frames [][]byte   // guarded by mu
	head   int        // guarded by mu: next frame to hand out

	made atomic.Int64 // frames made by Fill, in total
}

// NewPool returns an empty pool of request frames of type t (a request with no body:
// REQUEST_PING or REQUEST_DAEMON_STATUS).
func NewPool(t slurmproto.MsgType) *Pool { return &Pool{Type: t} }

// Next implements Source.
func (p *Pool) Next() ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.head >= len(p.frames) {
		return nil, false
	}
	f := p.frames[p.head]
	p.frames[p.head] = nil
	p.head++
	return f, true
}

// Len is the number of frames not handed out yet.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.frames) - p.head
}

// Made is the number of frames Fill has made over the pool's life.
func (p *Pool) Made() int64 { return p.made.Load() }

// FillStats describes one Fill.
type FillStats struct {
	Made     int
	Duration time.Duration
}

// Rate is credentials encoded per second.
func (s FillStats) Rate() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Made) / s.Duration.Seconds()
}

// TopUp makes frames until at least n are waiting, with parallel concurrent encodes.
func (p *Pool) TopUp(ctx context.Context, enc Encoder, n, parallel int) (FillStats, error) {
	need := n - p.Len()
	if need <= 0 {
		return FillStats{}, nil
	}
	return p.Fill(ctx, enc, need, parallel)
}

// Fill encodes n new credentials (parallel at a time) and appends their frames. The payload
// is what Slurm 22.05 signs: 0x02 || K12(body, custom=BE16(msg_type)) over the empty body.
func (p *Pool) Fill(ctx context.Context, enc Encoder, n, parallel int) (FillStats, error) {
	if parallel < 1 {
		parallel = 1
	}
	payload := auth.Payload(slurmproto.Version2205, uint16(p.Type), nil, auth.HashK12)
	out := make([][]byte, n)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				cred, err := enc.Encode(ctx, payload, auth.UIDAny)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("flood: encode credential: %w", err) })
					return
				}
				out[i] = RequestFrame(p.Type, cred)
			}
		}()
	}
	wg.Wait()
	st := FillStats{Duration: time.Since(start)}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	var made [][]byte
	for _, f := range out {
		if f != nil {
			made = append(made, f)
		}
	}
	st.Made = len(made)
	p.made.Add(int64(len(made)))
	p.mu.Lock()
	// Compact what was handed out, then append.
	p.frames = append(p.frames[p.head:], made...)
	p.head = 0
	p.mu.Unlock()
	return st, firstErr
}

// RequestFrame is the complete frame (length prefix included) of a body-less request of type
// t carrying cred, with a 22.05 header and no forwarding, as slurmctld sends it.
func RequestFrame(t slurmproto.MsgType, cred string) []byte {
	h := slurmproto.Header{Version: slurmproto.Version2205, MsgType: t}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, nil)
}

// Recycled hands out the same few frames over and over. Only for targets that never send
// credentials to munged (the no-auth limit server): it keeps the client's work per RPC
// identical without spending credentials.
type Recycled struct {
	frames [][]byte
	i      atomic.Uint64
}

// NewRecycled returns a Source cycling through frames.
func NewRecycled(frames [][]byte) *Recycled { return &Recycled{frames: frames} }

// Next implements Source.
func (r *Recycled) Next() ([]byte, bool) {
	if len(r.frames) == 0 {
		return nil, false
	}
	return r.frames[(r.i.Add(1)-1)%uint64(len(r.frames))], true
}
