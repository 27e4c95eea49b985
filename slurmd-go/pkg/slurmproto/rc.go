package slurmproto

import "strconv"

// General return codes (slurm/slurm_errno.h). The ESLURM_* / SLURM_* codes
// live in rc_table.go, generated from Slurm 22.05.8 slurm_errno.h. All codes
// are untyped constants so they fit uint32 wire fields and int Go code.
const (
	SlurmSuccess = 0
	// SlurmError is SLURM_ERROR (-1) as it appears in a u32 rc field.
	SlurmError = 0xffffffff
)

// System errno values that slurmd puts on the wire as return codes
// (Linux numbering, which is what Slurm on Linux sends).
const (
	EPERM     = 1
	ENOENT    = 2
	ESRCH     = 3
	EINTR     = 4
	EIO       = 5
	EAGAIN    = 11
	ENOMEM    = 12
	EACCES    = 13
	EBUSY     = 16
	EEXIST    = 17
	EINVAL    = 22
	ENOSPC    = 28
	ETIMEDOUT = 110
)

var errnoNames = map[uint32]string{
	EPERM: "EPERM", ENOENT: "ENOENT", ESRCH: "ESRCH", EINTR: "EINTR", EIO: "EIO",
	EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EBUSY: "EBUSY",
	EEXIST: "EEXIST", EINVAL: "EINVAL", ENOSPC: "ENOSPC", ETIMEDOUT: "ETIMEDOUT",
}

// RCName returns the symbolic name of a Slurm return code ("SLURM_SUCCESS",
// "ESLURM_ACCESS_DENIED", "EINVAL", ...) or its decimal value.
func RCName(rc uint32) string {
	switch rc {
	case SlurmSuccess:
		return "SLURM_SUCCESS"
	case SlurmError:
		return "SLURM_ERROR"
	}
	if s, ok := rcNames[rc]; ok {
		return s
	}
	if s, ok := errnoNames[rc]; ok {
		return s
	}
	return strconv.FormatUint(uint64(rc), 10)
}

// RCNameIn is RCName with the error code names of the release of protocol
// version v (some codes were renamed or reused between releases).
func RCNameIn(v uint16, rc uint32) string {
	if s, ok := namesIn(rcNamesByVersion, v)[rc]; ok {
		return s
	}
	return RCName(rc)
}
