package gpu

import (
	"context"
	"sync"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
)

// Lazy opens NVML on first use, so that a node whose gres.conf asks for no
// autodetection never loads the library. It is the daemon's gres.Detector
// and hands the same Provider to metrics and health.
type Lazy struct {
	o    Options
	once sync.Once
	p    Provider // set by once
}

// NewLazy returns a detector that calls Open(o) when first needed.
func NewLazy(o Options) *Lazy { return &Lazy{o: o} }

// Provider opens NVML (once) and returns the provider: a real one or Null.
// Any goroutine.
func (l *Lazy) Provider() Provider {
	l.once.Do(func() { l.p = Open(l.o) })
	return l.p
}

// Detect opens NVML only for AutoDetect=nvml (any other library is refused
// without it). Any goroutine.
func (l *Lazy) Detect(ctx context.Context, req gres.DetectRequest) ([]gres.Record, error) {
	return l.WithRelease(l.o.Release).Detect(ctx, req)
}

// WithRelease returns the detector for release v.
func (l *Lazy) WithRelease(v uint16) gres.Detector { return lazyRelease{l: l, v: v} }

type lazyRelease struct {
	l *Lazy
	v uint16
}

func (r lazyRelease) Detect(ctx context.Context, req gres.DetectRequest) ([]gres.Record, error) {
	if req.AutoDetect != gres.AutoDetectNVML {
		return Null{Why: "only AutoDetect=nvml is supported"}.Detect(ctx, req)
	}
	return r.l.Provider().WithRelease(r.v).Detect(ctx, req)
}

var _ Detector = (*Lazy)(nil)
