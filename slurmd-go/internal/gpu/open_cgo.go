//go:build linux && cgo

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Open loads NVML and initialises it. If Init fails (no libnvidia-ml, no
// kernel driver, ...) it logs why and returns the Null provider, and the
// library is never called again: go-nvml ends the process on any call
// after a failed Init.
func Open(o Options) Provider {
	return OpenLibrary(newLibrary(o), o)
}

// OpenLibrary is Open over a given NVML (tests pass go-nvml's mock).
func OpenLibrary(lib nvml.Interface, o Options) Provider {
	o = o.withDefaults()
	log := o.Logger.Named("gpu")
	if ret := lib.Init(); ret != nvml.SUCCESS {
		why := initFailure(ret)
		log.Info("no GPU autodetection: NVML Init failed", "reason", why)
		return Null{Why: why}
	}
	return newProvider(lib, o, log)
}

// initFailure names Init's return code without asking NVML
// (nvmlErrorString is a call too).
func initFailure(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "NVML library (libnvidia-ml.so.1) not found (ERROR_LIBRARY_NOT_FOUND)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA kernel driver not loaded (ERROR_DRIVER_NOT_LOADED)"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to talk to the NVIDIA driver (ERROR_NO_PERMISSION)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "NVML library and kernel driver versions differ (ERROR_LIB_RM_VERSION_MISMATCH)"
	}
	return fmt.Sprintf("NVML Init returned %d", int32(ret))
}
