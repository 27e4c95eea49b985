package proc

import "golang.org/x/sys/unix"

// RlimitTable is slurm_rlimits_info.c's list, in its order.
var RlimitTable = []RlimitInfo{
	{"CPU", unix.RLIMIT_CPU},
	{"FSIZE", unix.RLIMIT_FSIZE},
	{"DATA", unix.RLIMIT_DATA},
	{"STACK", unix.RLIMIT_STACK},
	{"CORE", unix.RLIMIT_CORE},
	{"RSS", unix.RLIMIT_RSS},
	{"NPROC", unix.RLIMIT_NPROC},
	{"NOFILE", unix.RLIMIT_NOFILE},
	{"MEMLOCK", unix.RLIMIT_MEMLOCK},
	{"AS", unix.RLIMIT_AS},
}
