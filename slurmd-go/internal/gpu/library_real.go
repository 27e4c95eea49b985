//go:build linux && cgo && !nvmlmock

package gpu

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// newLibrary is the real NVML (dlopen'ed at Init).
func newLibrary(o Options) nvml.Interface {
	if o.LibraryPath != "" {
		return nvml.New(nvml.WithLibraryPath(o.LibraryPath))
	}
	return nvml.New()
}
