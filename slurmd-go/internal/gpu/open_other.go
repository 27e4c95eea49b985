//go:build !(linux && cgo)

package gpu

// Open returns the Null provider: NVML needs cgo on Linux.
func Open(o Options) Provider {
	o = o.withDefaults()
	why := "built without cgo: NVML unavailable"
	o.Logger.Named("gpu").Info("no GPU autodetection", "reason", why)
	return Null{Why: why}
}
