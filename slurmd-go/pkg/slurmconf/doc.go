// Package slurmconf reads slurm.conf and cgroup.conf the way the slurmd of
// one Slurm release does — 22.05.8 (protocol V2205, 0x2600), 24.11.5
// (V2411, 0x2A00) or 26.05 (V2605, 0x2D00) — and returns a typed Config
// (CgroupConf) with that release's defaults filled in. It owns the key
// tables of each release (keys.go, cgroup.go), the line grammar (lexer.go,
// parse.go), each release's defaults and checks (build.go, node.go) and
// the messages its slurmd logs (errors.go). It is pure: no daemon state,
// no logging; the only outside calls are file reads and stats (Load,
// Include, PowerAction programs) and os/user lookups for SlurmUser and
// SlurmdUser.
//
//	Load(path)                                  22.05, as before
//	Load(path, Options{Version: V2411})         24.11 (V2605: 26.05)
//	Load(path, Options{Version: Lenient})       the union of all three
//	LoadCgroup(CgroupConfPath(path), Options{}) cgroup.conf beside it
//	LoadPMIx(MPIConfPath(path), Options{})      mpi/pmix's keys of mpi.conf beside it
//
// # Releases
//
// Key tables: a key is added, made defunct (accepted unchecked, ignored,
// "The option "X" is defunct, please remove it from slurm.conf." — 22.05
// words it "..., see man slurm.conf."), removed (unknown again), or changes
// kind from one release on; keys.go says which, read from
// slurm_conf_options[] and the NodeName/PartitionName tables of each
// release's read_config.c and from interfaces/cgroup.c. Beyond the tables:
//
//   - 24.11 resolves a relative Include against the directory of the file
//     slurmd was given (SLURM_CONF), 22.05 against the including file; 24.11
//     refuses globs in Include.
//   - 24.11 keeps every Prolog/Epilog line (Config.Prologs, Epilogs).
//   - 24.11 reads an unset plugin key, or one containing "none", as no
//     plugin (""): TaskPlugin, SwitchType, JobAcctGatherType,
//     JobContainerType, MpiDefault (also "openmpi"); 22.05 fills in
//     "task/none", "switch/none", ... It sorts TaskPlugin (reverse
//     alphabetical) and defaults SelectType to select/cons_tres,
//     TreeWidth to 16, UnkillableStepTimeout to max(60, 5*MessageTimeout),
//     HashPlugin to hash/k12 and TLSType to tls/none.
//   - 24.11 refuses a NodeSet named like a node, select/linear with
//     topology/tree, and NodeHostname lists of another length than the
//     NodeName list (22.05's multiple-slurmd build reuses the last name).
//   - 26.05 adds PowerAction lines, splits PrologEpilogTimeout into
//     PrologTimeout/EpilogTimeout, and replaces JobContainerType by
//     NamespaceType (any namespace plugin needs PrologFlags=Contain).
//   - cgroup.conf: 24.11 drops the kernel-memory keys, makes
//     CgroupAutomount defunct, adds CgroupPlugin=disabled and
//     EnableControllers/SignalChildrenProcesses/SystemdTimeout; 26.05 drops
//     CgroupReleaseAgentDir and adds CgroupSlice/CgroupJobIdPaths/
//     EnableExtraControllers.
//
// # Messages
//
// A *ParseError carries the file and line and, in Msg, the text the
// release's slurmd logs for the cause ("_parse_next_key: Parsing error at
// unrecognized key: X"); Fatal is the fatal line it logs next ("Unable to
// process configuration file"), empty when Msg is itself logged as fatal;
// Lines gives both as slurmd prints them. Config.Warnings are the lines
// slurmd logs and survives (defunct keys, keys given twice, values it
// resets), with file and line. The golden tests hold both against the
// real releases (oracle_test.go).
//
// # Lenient mode
//
// Options{Version: Lenient} reads a file before the release is known: the
// daemon uses it to find its controller, and once it has negotiated the
// controller's release it loads the file again strictly with that
// Version. A lenient read accepts every key any release's table has, with
// the newest kind that still reads it (a key only ever defunct stays
// defunct); it takes the newest release's defaults and value rules; and it
// applies only the checks every release makes, so it accepts every file
// one of the releases accepts (and more: a mix of 22.05-only and
// 26.05-only keys). Config.Version is then Lenient.
//
// # Grammar
//
// Line grammar (parse_config.c, the same in all three), in processing
// order per physical line:
//
//		raw line --hash--> strip "#..." (unless "\#") --> trailing "\" joins the
//		next line --> "\x" becomes "x" --> Include? --> first key=value --> rest
//
//	  - keys are case-insensitive, [A-Za-z0-9_.]+, optionally "+=", "-=", ...;
//	  - a value is "quoted text" or a run of non-blanks; "Key=" alone is an error;
//	  - a top-level line holds ONE key=value; only NodeName, PartitionName,
//	    DownNodes, NodeSet, FrontendName, PowerAction and SlurmctldHost
//	    lines carry more key=value pairs; anything left over is a parse error;
//	  - unknown keys are errors (as in slurmd), a key given twice keeps the
//	    last value (a list key keeps all);
//	  - "Include file" must start the line; "%c" becomes the lower-cased
//	    ClusterName seen so far.
//
// NodeName=DEFAULT and PartitionName=DEFAULT lines accumulate: a later DEFAULT
// line overrides only the keys it names, and every following non-DEFAULT
// line takes its unset keys from the defaults in force at that point.
// NodeAddr, NodeHostname and BcastAddr are not allowed on DEFAULT lines.
//
// Node ranges follow the Debian build (--enable-multiple-slurmd):
// NodeName=n[1-4] NodeAddr=127.0.0.1 Port=7001-7004 pairs the i-th name with
// the i-th port; NodeAddr and Port lists must have one entry or exactly as
// many as names.
//
// Not read: environment overrides (SLURM_TREE_WIDTH, SLURM_DEBUG_FLAGS),
// DebugFlags and TaskPluginParam values, partition values beyond their
// keys, and checks slurmd makes when it loads plugins (an unknown
// CgroupPlugin, for one).
//
// Concurrency: a *Config or *CgroupConf is immutable after Load returns and
// may be read from any goroutine.
package slurmconf
