// Package hostlist parses and prints Slurm hostlist expressions such as
// "n[1-4,7],gpu[01-16]" the way Slurm 22.05 (src/common/hostlist.c, one
// dimension) does, so that node lists we put on the wire or compare with
// slurmctld's are byte-identical to what the C daemons produce.
//
// Model (as in Slurm): a Hostlist is an ordered list of ranges. A range is
// either a single host without a numeric suffix ("login") or a prefix with a
// numeric interval and a zero-padding width ("n", 1..4, width 1). Pushing a
// host or range merges it into the last range when it continues it
// (n3 after n[1-2] gives n[1-3]); nothing is ever reordered unless Sort or
// Uniq is called. String prints consecutive ranges with the same prefix in
// one bracket group: n[1-3,7].
//
//	"n[1-2],m1" --Parse--> [n 1-2 w1] [m 1-1 w1] --String--> "n[1-2],m1"
//	                            |
//	                       Push("n3") only joins the LAST range
//
// Expression rules (checked against `scontrol show hostnames` of 22.05.8):
//   - separators are ',', ' ' and '\t' outside brackets; empty items are skipped;
//   - only the last bracket group must end the item; earlier groups in the
//     prefix are expanded too (r[1-2]n[1-3]); the left-most group varies fastest
//     among prefix groups, the suffix group fastest of all;
//   - padding comes from the width of the lower bound ("[01-3]" gives 01,02,03,
//     "[1-03]" gives 1,2,3);
//   - "lo-" means "lo"; "hi<lo", an empty item, a non-digit and a range of
//     more than MaxRange hosts are errors.
//
// Where Slurm silently makes odd host names out of malformed input (an
// unclosed '[' turns "n[1-2" into the host "n]") this package returns an
// error wrapping ErrSyntax instead.
//
// Concurrency: a *Hostlist is not safe for concurrent mutation; the package
// functions are safe from any goroutine.
package hostlist
