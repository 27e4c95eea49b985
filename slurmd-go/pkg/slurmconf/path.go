package slurmconf

import "strings"

// ExpandPath substitutes %h (host name) and %n (node name) in
// SlurmdSpoolDir, SlurmdPidFile or SlurmdLogFile. Like
// slurm_conf_expand_slurmd_path only the FIRST %h and the first %n are
// replaced, %h before %n.
func ExpandPath(p, nodeName, hostName string) string {
	p = strings.Replace(p, "%h", hostName, 1)
	return strings.Replace(p, "%n", nodeName, 1)
}
