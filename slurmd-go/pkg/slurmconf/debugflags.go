package slurmconf

import (
	"strings"
)

// DebugFlag is one DebugFlags name and its bit (slurm.h DEBUG_FLAG_*).
type DebugFlag struct {
	Name string
	Bit  uint
}

// DebugFlagTable is a release's DebugFlags names in the order its
// debug_flags2str (src/common/read_config.c) prints them. 22.05's slurmd
// takes no REQUEST_SET_DEBUG_FLAGS, so reads before 24.11 use 24.11's.
func DebugFlagTable(v uint16) []DebugFlag {
	if v >= V2605 || v == Lenient {
		return debugFlags2605
	}
	return debugFlags2411
}

// DebugFlagBits reads a DebugFlags value ("Steps,Gres") as bits; names are
// matched without case, as debug_str2flags does, and unknown ones (left to
// slurm.conf's own checks) are skipped.
func DebugFlagBits(v uint16, s string) uint64 {
	var bits uint64
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		for _, f := range DebugFlagTable(v) {
			if strings.EqualFold(f.Name, n) {
				bits |= 1 << f.Bit
			}
		}
	}
	return bits
}

// DebugFlagString prints bits as that release's debug_flags2str does:
// names joined by commas, "" for none.
func DebugFlagString(v uint16, bits uint64) string {
	var names []string
	for _, f := range DebugFlagTable(v) {
		if bits&(1<<f.Bit) != 0 {
			names = append(names, f.Name)
		}
	}
	return strings.Join(names, ",")
}

// The tables, from each release's debug_flags2str and slurm.h.
var debugFlags2411 = []DebugFlag{
	{"Accrue", 50}, {"JobAccountGather", 54}, {"Agent", 52}, {"AuditRPCs", 25}, {"Backfill", 12},
	{"BackfillMap", 27}, {"BurstBuffer", 40}, {"Cgroup", 55}, {"CpuFrequency", 41}, {"CPU_Bind", 3},
	{"Data", 8}, {"DBD_Agent", 51}, {"DB_Archive", 44}, {"DB_Assoc", 30}, {"DB_TRES", 45},
	{"DB_Event", 31}, {"DB_Job", 32}, {"DB_QOS", 33}, {"DB_Query", 34}, {"DB_Reservation", 35},
	{"DB_Resource", 36}, {"DB_Step", 37}, {"DB_Usage", 38}, {"DB_WCKey", 39}, {"Dependency", 53},
	{"Energy", 18}, {"Federation", 48}, {"FrontEnd", 15}, {"Gang", 13}, {"GLOB_SILENCE", 23},
	{"Gres", 6}, {"Hetjob", 49}, {"Interconnect", 22}, {"JobComp", 46}, {"JobContainer", 24},
	{"NodeFeatures", 47}, {"License", 20}, {"MPI", 7}, {"Network", 10}, {"NetworkRaw", 4},
	{"NO_CONF_HASH", 5}, {"Power", 42}, {"Priority", 11}, {"Profile", 21}, {"Protocol", 26},
	{"Reservation", 14}, {"Route", 29}, {"Sack", 16}, {"Script", 56}, {"SelectType", 0}, {"Steps", 1},
	{"Switch", 17}, {"TLS", 19}, {"TraceJobs", 28}, {"Triggers", 2}, {"ConMgr", 9},
}

var debugFlags2605 = []DebugFlag{
	{"Accrue", 50}, {"JobAccountGather", 54}, {"Agent", 52}, {"AuditRPCs", 25}, {"AuditTLS", 15},
	{"Backfill", 12}, {"BackfillMap", 27}, {"BurstBuffer", 40}, {"Cgroup", 55}, {"CpuFrequency", 41},
	{"CPU_Bind", 3}, {"Data", 8}, {"DBD_Agent", 51}, {"DB_Archive", 44}, {"DB_Assoc", 30},
	{"DB_TRES", 45}, {"DB_Event", 31}, {"DB_Job", 32}, {"DB_QOS", 33}, {"DB_Query", 34},
	{"DB_Reservation", 35}, {"DB_Resource", 36}, {"DB_Step", 37}, {"DB_Usage", 38}, {"DB_WCKey", 39},
	{"Dependency", 53}, {"Energy", 18}, {"Federation", 48}, {"Gang", 13}, {"GLOB_SILENCE", 23},
	{"Gres", 6}, {"Hetjob", 49}, {"Interconnect", 22}, {"JobComp", 46}, {"Namespace", 24},
	{"NodeFeatures", 47}, {"License", 20}, {"Metrics", 57}, {"MPI", 7}, {"Network", 10},
	{"NetworkRaw", 4}, {"NO_CONF_HASH", 5}, {"Power", 42}, {"Priority", 11}, {"Profile", 21},
	{"Protocol", 26}, {"Reservation", 14}, {"Route", 29}, {"Sack", 16}, {"Script", 56},
	{"SelectType", 0}, {"Steps", 1}, {"Switch", 17}, {"thread", 43}, {"TLS", 19}, {"TraceJobs", 28},
	{"Triggers", 2}, {"ConMgr", 9},
}
