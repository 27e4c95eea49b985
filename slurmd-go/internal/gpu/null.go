package gpu

import (
	"context"
	"fmt"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
)

// Null is the provider of a node without NVML: no GPU, no sample, no
// event. It never calls NVML.
type Null struct {
	Why string // why NVML is not used, for logs and -G
}

var _ Provider = Null{}

// Detect finds no library: the node registers the GPUs gres.conf names,
// without autodetected ones (gres.ErrNoLibrary).
func (n Null) Detect(_ context.Context, req gres.DetectRequest) ([]gres.Record, error) {
	return nil, fmt.Errorf("%w: AutoDetect=%s: %s", gres.ErrNoLibrary, req.AutoDetect, n.Why)
}

// WithRelease is n: nothing to name.
func (n Null) WithRelease(uint16) gres.Detector { return n }

// Devices lists none.
func (Null) Devices(context.Context) ([]Device, error) { return nil, nil }

// Sample reads nothing.
func (Null) Sample(context.Context) ([]Sample, error) { return nil, nil }

// Watch returns a channel closed when ctx ends.
func (Null) Watch(ctx context.Context) (<-chan Event, error) {
	ch := make(chan Event)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// Reason says why NVML is not used.
func (n Null) Reason() string { return n.Why }

// Close does nothing.
func (Null) Close() error { return nil }
