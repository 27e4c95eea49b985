package ring

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Timings of the ring's set-up.
const (
	// dialTimeout bounds one dial, so an address that swallows packets is given up and
	// retried (re-reading the rendezvous file) instead of eating the whole connect timeout.
	dialTimeout = time.Second
	// dialBackoff spaces failed dials: quick enough for a job step's start-up, slow enough not
	// to spin on a port that refuses.
	dialBackoff = 100 * time.Millisecond
	// pollInterval is how often the successor's rendezvous file is looked for: a shared
	// filesystem gives no cheap change notification.
	pollInterval = 20 * time.Millisecond

	recvPiece  = 256 << 10 // bytes read before they are added in, so adding overlaps the wire
	introMagic = "RNG1"    // an intro: magic, its rank, ranks, bytes, name length, name
	introHead  = 4 + 4 + 4 + 8 + 2
)

// ErrConfig marks an invalid Config: cmd/allreduce exits 2 on it, 1 on any other error.
var ErrConfig = errors.New("invalid configuration")

// Config is one rank's part of a run.
type Config struct {
	Rank, Size     int           // this task's rank (SLURM_PROCID) and the ring's size (SLURM_NTASKS)
	Bytes          int           // gradient size in bytes, a multiple of 4*Size
	Warmup, Iters  int           // untimed iterations, then timed ones
	Rendezvous     string        // directory every task sees (Size > 1)
	ListenIP       string        // IP this rank listens on (port 0) and publishes
	Node           string        // this task's node name (SLURMD_NODENAME)
	ConnectTimeout time.Duration // for the whole ring set-up, counted from Start
	StepTimeout    time.Duration // for each iteration
	Start          time.Time     // program start; zero: when Run is called
}

// Result is one rank's timings; Nodes holds every rank's node name in rank order.
type Result struct {
	Ranks, Bytes, Warmup int
	Steps                []time.Duration
	Nodes                []string
}

// Run connects the ring, runs cfg.Warmup+cfg.Iters all-reduces, checks each sum and returns
// the timed iterations. Errors name the rank and node.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w (%v)", context.Cause(ctx), err)
		}
		if err != nil {
			err = fmt.Errorf("rank %d (node %s): %w", cfg.Rank, cfg.Node, err)
		}
	}()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nodes := []string{cfg.Node}
	var l *link
	if cfg.Size > 1 {
		if l, err = connect(ctx, cfg); err != nil {
			return nil, err
		}
		defer l.close()
		defer context.AfterFunc(ctx, l.close)()
		if nodes, err = l.gatherNames(cfg); err != nil {
			return nil, err
		}
	}
	buf := make([]float32, cfg.Bytes/4)
	wire := make([]byte, 2*cfg.Bytes/cfg.Size) // one chunk out, one in
	want := float32(cfg.Size * (cfg.Size + 1) / 2)
	res = &Result{Ranks: cfg.Size, Bytes: cfg.Bytes, Warmup: cfg.Warmup, Nodes: nodes}
	for it := range cfg.Warmup + cfg.Iters {
		for i := range buf {
			buf[i] = float32(cfg.Rank + 1)
		}
		t0 := time.Now()
		if l != nil {
			l.setDeadline(t0.Add(cfg.StepTimeout))
			if err := l.allReduce(buf, wire); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = fmt.Errorf("step timeout %v exceeded: %w", cfg.StepTimeout, err)
				}
				return nil, fmt.Errorf("%s: %w", cfg.iterName(it), err)
			}
		}
		d := time.Since(t0)
		for i, v := range buf {
			if v != want {
				return nil, fmt.Errorf("%s: wrong sum: element %d is %v, want %v", cfg.iterName(it), i, v, want)
			}
		}
		if it >= cfg.Warmup {
			res.Steps = append(res.Steps, d)
		}
	}
	return res, nil
}

// Line is rank 0's report, one JSON line on its stdout: what the zone bench reads.
type Line struct {
	Ranks   int       `json:"ranks"`
	Bytes   int       `json:"bytes"`
	Warmup  int       `json:"warmup"`
	StepsS  []float64 `json:"steps_s"`
	MedianS float64   `json:"median_s"`
	MinS    float64   `json:"min_s"`
	MaxS    float64   `json:"max_s"`
	Nodes   []string  `json:"nodes"`
	OK      bool      `json:"ok"`
}

// JSON is rank 0's report line (no newline).
func (r *Result) JSON() ([]byte, error) {
	line := Line{Ranks: r.Ranks, Bytes: r.Bytes, Warmup: r.Warmup, StepsS: []float64{}, Nodes: r.Nodes, OK: true}
	for _, d := range r.Steps {
		line.StepsS = append(line.StepsS, d.Seconds())
	}
	if n := len(line.StepsS); n > 0 {
		s := slices.Sorted(slices.Values(line.StepsS))
		line.MinS, line.MaxS = s[0], s[n-1]
		line.MedianS = (s[(n-1)/2] + s[n/2]) / 2
	}
	return json.Marshal(line)
}

func (c Config) validate() error {
	var why string
	ip := net.ParseIP(c.ListenIP)
	switch {
	case c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size:
		why = fmt.Sprintf("rank %d of %d ranks", c.Rank, c.Size)
	case c.Bytes <= 0 || c.Bytes%(4*c.Size) != 0:
		why = fmt.Sprintf("bytes %d is not a positive multiple of 4*ranks = %d", c.Bytes, 4*c.Size)
	case c.Iters < 1 || c.Warmup < 0:
		why = fmt.Sprintf("iters %d, warmup %d: want iters >= 1, warmup >= 0", c.Iters, c.Warmup)
	case len(c.Node) > math.MaxUint16:
		why = "node name too long"
	case c.Size == 1:
		return nil // no network: the rest is unused
	case c.Rendezvous == "":
		why = "no rendezvous directory"
	case ip == nil || ip.IsUnspecified():
		why = fmt.Sprintf("listen IP %q is not a usable IP address", c.ListenIP)
	case c.ConnectTimeout <= 0 || c.StepTimeout <= 0:
		why = fmt.Sprintf("connect timeout %v, step timeout %v: want both > 0", c.ConnectTimeout, c.StepTimeout)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrConfig, why)
}

func (c Config) iterName(it int) string {
	if it < c.Warmup {
		return fmt.Sprintf("warmup iteration %d of %d", it+1, c.Warmup)
	}
	return fmt.Sprintf("iteration %d of %d", it-c.Warmup+1, c.Iters)
}

func mod(a, n int) int { return ((a % n) + n) % n }

// intro is how a rank introduces itself round the ring: who it is, what it will send, where.
func intro(rank, size, nbytes int, node string) []byte {
	b := append(make([]byte, 0, introHead+len(node)), introMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(rank))
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint64(b, uint64(nbytes))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(node)))
	return append(b, node...)
}

// link is one rank's two ring connections.
type link struct {
	rank, size int
	next, prev *net.TCPConn // to the successor, from the predecessor
	once       sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		for _, c := range []*net.TCPConn{l.next, l.prev} {
			if c != nil { // connect's failures leave one or both unset
				c.Close()
			}
		}
	})
}

func (l *link) setDeadline(t time.Time) {
	l.next.SetDeadline(t)
	l.prev.SetDeadline(t)
}

// connect publishes this rank's address, then dials the successor while accepting the
// predecessor, both by cfg.Start+cfg.ConnectTimeout. The rendezvous file goes on return: once
// the predecessor is in nobody reads it, and a stale one would mislead a later run.
func connect(ctx context.Context, cfg Config) (*link, error) {
	deadline := cfg.Start.Add(cfg.ConnectTimeout)
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(cfg.ListenIP)})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.ListenIP, err)
	}
	defer ln.Close()
	defer context.AfterFunc(ctx, func() { ln.Close() })()
	addr := net.JoinHostPort(cfg.ListenIP, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	tmp := filepath.Join(cfg.Rendezvous, fmt.Sprintf(".rank-%d.tmp", cfg.Rank))
	mine := filepath.Join(cfg.Rendezvous, fmt.Sprintf("rank-%d", cfg.Rank))
	err = os.MkdirAll(cfg.Rendezvous, 0o755)
	if err == nil {
		err = os.WriteFile(tmp, []byte(addr+"\n"), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, mine) // atomic: a reader sees no file or a whole one
	}
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w", err)
	}
	defer os.Remove(mine)

	var prev *net.TCPConn
	accepted := make(chan error, 1)
	go func() { // exactly one connection: gatherNames checks it is the predecessor's
		ln.SetDeadline(deadline)
		p := mod(cfg.Rank-1, cfg.Size)
		var err error
		if prev, err = ln.AcceptTCP(); errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("no connection from rank %d within %v", p, cfg.ConnectTimeout)
		} else if err != nil {
			err = fmt.Errorf("waiting for rank %d: %w", p, err)
		}
		accepted <- err
	}()
	next, err := dialNext(ctx, cfg, deadline)
	if err != nil {
		ln.Close() // the ring cannot form: stop waiting for the predecessor
	}
	if aerr := <-accepted; err == nil {
		err = aerr // the dialer's error says more, so it wins
	}
	l := &link{rank: cfg.Rank, size: cfg.Size, next: next, prev: prev}
	if err != nil {
		l.close()
		return nil, err
	}
	next.SetNoDelay(true)
	prev.SetNoDelay(true)
	return l, nil
}

// dialNext dials the address in the successor's rendezvous file (re-read before each try),
// retrying until deadline.
func dialNext(ctx context.Context, cfg Config, deadline time.Time) (*net.TCPConn, error) {
	next := (cfg.Rank + 1) % cfg.Size
	path := filepath.Join(cfg.Rendezvous, fmt.Sprintf("rank-%d", next))
	where := path // until an address is read
	var err error
	for ctx.Err() == nil && (err == nil || time.Now().Before(deadline)) {
		var b []byte
		wait := pollInterval
		if b, err = os.ReadFile(path); errors.Is(err, fs.ErrNotExist) {
			err = errors.New("rendezvous file not written yet")
		} else if err == nil {
			where, wait = strings.TrimSpace(string(b)), dialBackoff
			d := net.Dialer{Timeout: dialTimeout, Deadline: deadline} // the earlier one applies
			var c net.Conn
			if c, err = d.DialContext(ctx, "tcp", where); err == nil {
				return c.(*net.TCPConn), nil
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(wait, time.Until(deadline))):
		}
	}
	if err == nil {
		err = context.Cause(ctx)
	}
	return nil, fmt.Errorf("cannot reach rank %d at %s within %v: %w", next, where, cfg.ConnectTimeout, err)
}

// exchange writes out to the successor concurrently with recv on the predecessor, so neither
// direction waits for the other's socket buffers. On an error it closes the link, which ends
// the other direction too.
func (l *link) exchange(out []byte, recv func(io.Reader) error) error {
	sent := make(chan error, 1)
	go func() { _, err := l.next.Write(out); sent <- err }()
	if err := recv(l.prev); err != nil {
		l.close()
		<-sent
		return fmt.Errorf("receiving from rank %d: %w", mod(l.rank-1, l.size), err)
	}
	if serr := <-sent; serr != nil {
		l.close()
		return fmt.Errorf("sending to rank %d: %w", (l.rank+1)%l.size, serr)
	}
	return nil
}

// gatherNames is a ring all-gather of the ranks' intros, within cfg.StepTimeout: each rank
// learns every node name, and a rank whose size or bytes differ, or a connection that is not
// the predecessor's (a stale rendezvous file), fails here instead of hanging the ring.
func (l *link) gatherNames(cfg Config) ([]string, error) {
	n := cfg.Size
	names := make([]string, n)
	names[cfg.Rank] = cfg.Node
	l.setDeadline(time.Now().Add(cfg.StepTimeout))
	for s := range n - 1 {
		out, in := mod(cfg.Rank-s, n), mod(cfg.Rank-s-1, n)
		err := l.exchange(intro(out, n, cfg.Bytes, names[out]), func(r io.Reader) error {
			got, want := make([]byte, introHead), intro(in, n, cfg.Bytes, "")
			if _, err := io.ReadFull(r, got); err != nil {
				return err
			}
			if !bytes.Equal(got[:introHead-2], want[:introHead-2]) {
				return fmt.Errorf("intro %x, want %x (magic, rank, ranks, bytes)", got, want)
			}
			b := make([]byte, binary.LittleEndian.Uint16(got[introHead-2:]))
			_, err := io.ReadFull(r, b)
			names[in] = string(b)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("exchanging node names, step %d: %w", s+1, err)
		}
	}
	return names, nil
}

// allReduce sums buf over the ring in place. wire holds one chunk to send, then one received.
func (l *link) allReduce(buf []float32, wire []byte) error {
	n, r := l.size, l.rank
	m := len(buf) / n
	out, in := wire[:4*m], wire[4*m:]
	chunk := func(i int) []float32 { i = mod(i, n); return buf[i*m : (i+1)*m] }
	for phase, name := range []string{"reduce-scatter", "all-gather"} {
		for s := range n - 1 {
			// Reduce-scatter: pass on chunk r-s, add in chunk r-s-1; rank r ends up owning the
			// sum of chunk r+1, which the all-gather passes on (r+1-s), received chunks (r-s)
			// overwriting.
			src, dst := chunk(r-s+phase), chunk(r-s-1+phase)
			for i, v := range src {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
			}
			err := l.exchange(out, func(rd io.Reader) error {
				for off := 0; off < len(in); off += recvPiece {
					p := in[off:min(off+recvPiece, len(in))]
					if _, err := io.ReadFull(rd, p); err != nil {
						return err
					}
					d := dst[off/4 : off/4+len(p)/4]
					for i := range d {
						v := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
						if phase == 0 {
							v += d[i]
						}
						d[i] = v
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s step %d of %d: %w", name, s+1, n-1, err)
			}
		}
	}
	return nil
}
