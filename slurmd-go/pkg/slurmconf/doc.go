// Package slurmconf reads slurm.conf the way Slurm 22.05.8 does
// (src/common/parse_config.c, read_config.c, node_conf.c) and returns a typed
// Config with 22.05's defaults filled in. It is pure: no daemon state, no
// logging; the only outside calls are file reads (Load, Include) and
// os/user lookups for SlurmUser/SlurmdUser.
//
// Line grammar (parse_config.c), in processing order per physical line:
//
//		raw line --hash--> strip "#..." (unless "\#") --> trailing "\" joins the
//		next line --> "\x" becomes "x" --> Include? --> first key=value --> rest
//
//	  - keys are case-insensitive, [A-Za-z0-9_.]+, optionally "+=", "-=", ...;
//	  - a value is "quoted text" or a run of non-blanks; "Key=" alone is an error;
//	  - a top-level line holds ONE key=value; only NodeName, PartitionName,
//	    DownNodes, NodeSet, FrontendName and SlurmctldHost lines carry more
//	    key=value pairs; anything left over is a parse error;
//	  - unknown keys are errors (as in slurmctld), a key given twice keeps the
//	    last value;
//	  - "Include file" must start the line; file is relative to the including
//	    file's directory; "%c" becomes the lower-cased ClusterName seen so far;
//	    22.05 has no globbing.
//
// NodeName=DEFAULT and PartitionName=DEFAULT lines accumulate: a later DEFAULT
// line overrides only the keys it names, and every following non-DEFAULT
// line takes its unset keys from the defaults in force at that point.
// NodeAddr, NodeHostname and BcastAddr are not allowed on DEFAULT lines.
//
// Node ranges follow the Debian build (--enable-multiple-slurmd):
// NodeName=n[1-4] NodeAddr=127.0.0.1 Port=7001-7004 pairs the i-th name with
// the i-th port; NodeAddr and Port lists must have one entry or exactly as
// many as names; NodeHostname entries pair up while they last, the last one
// is reused after that.
//
// Concurrency: a *Config is immutable after Parse returns and may be read
// from any goroutine.
package slurmconf
