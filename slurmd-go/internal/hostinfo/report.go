package hostinfo

import (
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// Reported returns hw with the CPU topology slurmd registers for a node
// configured as conf (slurmd.c _read_config): the slurm.conf values, unless
// the hardware has fewer CPUs than configured and configOverrides
// (SlurmdParameters=config_overrides) is false, in which case the hardware
// values. Memory, disk and the other fields are always the measured ones.
func Reported(hw Info, conf *slurmconf.Node, configOverrides bool) Info {
	return reported(hw, conf, configOverrides, false)
}

// ReportedFor is Reported with the policy taken from cfg, including the
// rule for select/cons_res, cons_tres or gang scheduling: when only the
// socket/core split differs (same sockets*cores, e.g. a KNL rebooted into
// another NUMA mode) the hardware sockets and cores are reported with the
// configured CPUs, boards and threads.
func ReportedFor(hw Info, conf *slurmconf.Node, cfg *slurmconf.Config) Info {
	return reported(hw, conf, cfg.ConfigOverrides, consResOrGang(cfg))
}

func reported(hw Info, conf *slurmconf.Node, overrides, crOrGang bool) Info {
	out := hw
	switch {
	case !overrides && hw.CPUs < conf.CPUs:
		// keep the hardware values
	case !overrides && crOrGang &&
		hw.Sockets != conf.Sockets && hw.CoresPerSocket != conf.CoresPerSocket &&
		int(hw.Sockets)*int(hw.CoresPerSocket) == int(conf.Sockets)*int(conf.CoresPerSocket):
		out.CPUs, out.Boards, out.ThreadsPerCore = conf.CPUs, conf.Boards, conf.ThreadsPerCore
	default:
		out.CPUs, out.Boards, out.Sockets = conf.CPUs, conf.Boards, conf.Sockets
		out.CoresPerSocket, out.ThreadsPerCore = conf.CoresPerSocket, conf.ThreadsPerCore
	}
	return out
}

// consResOrGang is slurmd's cr_flag || gang_flag.
func consResOrGang(cfg *slurmconf.Config) bool {
	switch cfg.SelectType {
	case "select/cons_res", "select/cons_tres":
		return true
	case "select/cray_aries":
		p := strings.ToLower(cfg.SelectTypeParameters)
		if strings.Contains(p, "other_cons_res") || strings.Contains(p, "other_cons_tres") {
			return true
		}
	}
	return strings.Contains(strings.ToUpper(cfg.PreemptMode), "GANG")
}
