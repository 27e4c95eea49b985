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

// Encoder makes credentials (auth.Authenticator's Encode: *munge.Munge or *authslurm.Auth).
type Encoder interface {
	Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error)
}

// Request is one kind of body-less request the client sends (REQUEST_PING or
// REQUEST_DAEMON_STATUS): its message type, header version and auth plugin, as slurmctld of
// that release sends it.
type Request struct {
	Type    slurmproto.MsgType
	Version uint16 // header version: slurmproto.Version2205 or Version2411
	Plugin  uint32 // auth plugin of the credential: slurmproto.AuthPluginMunge or AuthPluginSlurm
}

// Request2205 is a 22.05 request signed with munge, the bench's original client.
func Request2205(t slurmproto.MsgType) Request {
	return Request{Type: t, Version: slurmproto.Version2205, Plugin: slurmproto.AuthPluginMunge}
}

// Payload is what the credential signs: Slurm's message hash, 0x02 || K12(body,
// custom=BE16(msg_type)), over the empty body (the same in 22.05 and 24.11).
func (r Request) Payload() []byte { return auth.Payload(r.Version, uint16(r.Type), nil, auth.HashK12) }

// Frame is the complete frame (length prefix included) of the request carrying cred, with no
// forwarding, as slurmctld sends it.
func (r Request) Frame(cred string) []byte {
	h := slurmproto.Header{Version: r.Version, MsgType: r.Type}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: r.Plugin, Cred: cred}, nil)
}

// Source hands out complete request frames. Safe for concurrent use.
type Source interface {
	// Next returns the next frame to send, or false when none is left.
	Next() ([]byte, bool)
}

// Pool is a FIFO of pre-encoded request frames of one kind, each carrying its own munge
// credential and each handed out once: munged refuses a credential it has decoded before
// (EMUNGE_CRED_REPLAYED), and a real client never reuses one. Credentials are made by Fill,
// outside any timed phase. Safe for concurrent use.
type Pool struct {
	Req Request

	mu     sync.Mutex // guards frames, head
	frames [][]byte   // guarded by mu
	head   int        // guarded by mu: next frame to hand out

	made atomic.Int64 // frames made by Fill, in total
}

// NewPool returns an empty pool of frames of req.
func NewPool(req Request) *Pool { return &Pool{Req: req} }

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

// Fill encodes n new credentials (parallel at a time) and appends their frames.
func (p *Pool) Fill(ctx context.Context, enc Encoder, n, parallel int) (FillStats, error) {
	if parallel < 1 {
		parallel = 1
	}
	payload := p.Req.Payload()
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
				out[i] = p.Req.Frame(cred)
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

// Minter makes a fresh frame for every Next: a credential made for it, as the request is
// sent, the way slurmctld signs each RPC. It is the source for auth/slurm, whose HS256 tokens
// the client makes itself in microseconds (no service to wait for, and no replay cache: a
// pool would only add expiry to manage, the tokens living 60 s). Their cost lands in the
// client's CPU during the timed phase. Tokens made in the same second for the same message
// are byte for byte the same, as stock's are: auth/slurm's claims carry no nonce. Safe for
// concurrent use.
type Minter struct {
	req     Request
	enc     Encoder
	payload []byte
	made    atomic.Int64

	mu  sync.Mutex // guards err
	err error      // guarded by mu: the first failed encode
}

// NewMinter returns a Source minting frames of req with enc.
func NewMinter(req Request, enc Encoder) *Minter {
	return &Minter{req: req, enc: enc, payload: req.Payload()}
}

// Next implements Source. A failed encode ends the source (false) and is kept for Err.
func (m *Minter) Next() ([]byte, bool) {
	cred, err := m.enc.Encode(context.Background(), m.payload, auth.UIDAny)
	if err != nil {
		m.mu.Lock()
		if m.err == nil {
			m.err = fmt.Errorf("flood: mint credential: %w", err)
		}
		m.mu.Unlock()
		return nil, false
	}
	m.made.Add(1)
	return m.req.Frame(cred), true
}

// Made is the number of frames minted so far.
func (m *Minter) Made() int64 { return m.made.Load() }

// Err is the first failed encode (nil if none).
func (m *Minter) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Recycled hands out the same few frames over and over. Only for targets that never check
// credentials (the no-auth limit server): it keeps the client's work per RPC identical
// without spending credentials.
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
