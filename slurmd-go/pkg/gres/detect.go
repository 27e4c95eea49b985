package gres

import (
	"context"
	"errors"
)

// ErrNoLibrary is what a Detector wraps when the GPU library or driver is
// missing: the node then registers the GPUs gres.conf names, without
// autodetected ones, as stock does on a node without NVML.
var ErrNoLibrary = errors.New("gres: GPU library not available")

// DetectRequest says what AutoDetect= asked for.
type DetectRequest struct {
	AutoDetect string // AutoDetectNVML, ...
	CPUs       uint32 // the node's CPU count (Record.CPUCnt of what is found)
}

// Detector finds a node's GPUs for AutoDetect= (stock's gpu plugin
// get_system_gpu_list): one Record per device, Name "gpu", with Type,
// File, Cores, Links (and UniqueID for MIG) filled in. internal/gpu
// implements it over NVML. A nil slice with no error means "no list" (stock's
// gpu/generic); an empty one means no GPU was found.
//
// Concurrency: Detect may be called from any goroutine, once per load.
type Detector interface {
	Detect(ctx context.Context, req DetectRequest) ([]Record, error)
}

// NullDetector finds nothing: a node without any GPU library.
type NullDetector struct{}

// Detect returns no list.
func (NullDetector) Detect(context.Context, DetectRequest) ([]Record, error) { return nil, nil }

var _ Detector = NullDetector{}
