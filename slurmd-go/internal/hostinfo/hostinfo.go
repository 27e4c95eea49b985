package hostinfo

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrProbe is wrapped by every error of this package.
var ErrProbe = errors.New("hostinfo: probe failed")

// Info is one measurement of the host.
type Info struct {
	CPUs           uint16
	Boards         uint16
	Sockets        uint16 // total sockets on all boards
	CoresPerSocket uint16
	ThreadsPerCore uint16
	RealMemory     uint64 // MiB
	TmpDisk        uint32 // MiB
	UpTime         uint32 // seconds since the host booted
	CPULoad        uint32 // 5-minute load average * 100
	FreeMem        uint64 // MiB
	Arch           string
	OS             string
	Hostname       string // short host name
	// Warnings lists what could not be measured exactly (Slurm logs these
	// and reports a fallback value).
	Warnings []string
}

// SocketsPerBoard is what `slurmd -C` prints as SocketsPerBoard.
func (i Info) SocketsPerBoard() uint16 {
	if i.Boards == 0 {
		return i.Sockets
	}
	return i.Sockets / i.Boards
}

// Probe measures this host. tmpFS is slurm.conf's TmpFS ("" means /tmp).
func Probe(tmpFS string) (Info, error) { return ProbeRoot("/", tmpFS) }

// ProbeRoot is Probe with the CPU topology read below root (root +
// "/sys/devices/system/cpu"); memory, load, uptime, TmpFS and uname always
// come from the running kernel.
func ProbeRoot(root, tmpFS string) (Info, error) {
	var info Info
	topo, err := ReadTopology(root)
	if err != nil {
		return Info{}, err
	}
	info.CPUs, info.Boards, info.Sockets = topo.CPUs, topo.Boards, topo.Sockets
	info.CoresPerSocket, info.ThreadsPerCore = topo.CoresPerSocket, topo.ThreadsPerCore
	info.Warnings = append(info.Warnings, topo.Warnings...)
	if err := probeKernel(&info, tmpFS); err != nil {
		return Info{}, err
	}
	if v := os.Getenv("SLURM_ARCH"); v != "" {
		info.Arch = v
	}
	if v := os.Getenv("SLURM_OS"); v != "" {
		info.OS = v
	}
	hn, err := os.Hostname()
	if err != nil {
		return Info{}, fmt.Errorf("%w: hostname: %w", ErrProbe, err)
	}
	info.Hostname, _, _ = strings.Cut(hn, ".")
	return info, nil
}

// Load is the part of Info that changes between pings.
type Load struct {
	CPULoad uint32 // 5-minute load average * 100
	FreeMem uint64 // MiB
	UpTime  uint32 // seconds since the host booted
}
