package gpu

// applicationXIDs are XIDs caused by the user's program, not the GPU, which
// NVIDIA's k8s-device-plugin also ignores (internal/rm/health.go): 13
// graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
// processing, 45 preemptive cleanup, 68 video processor exception.
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true}

// IsApplicationXID reports whether xid is one that health ignores.
func IsApplicationXID(xid uint64) bool { return applicationXIDs[xid] }
