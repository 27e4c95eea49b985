package hostinfo

// realMemory reproduces get_memory: the page count goes through a C float
// (24-bit mantissa) before scaling, which can move the result by 1 MiB on
// hosts with more than 64 GiB.
func realMemory(pages, pageSize uint64) uint64 {
	return uint64(float64(float32(pages)) * (float64(pageSize) / 1048576.0))
}

// cpuLoad reproduces get_cpu_load: loads[1] / (float)(1<<SI_LOAD_SHIFT) in
// float, then * 100.0 in double, truncated.
func cpuLoad(load1 uint64) uint32 {
	return uint32(float64(float32(load1)/float32(1<<16)) * 100.0)
}
