package stepapi

import "fmt"

// BcastFileName is the file name a destination directory gets on a node
// (stock's BCAST_FILE_FMT, slurm_bcast_<job>.<step>_<node>): slurmd writes
// srun --bcast=<dir>/ there and the step manager execs it.
func BcastFileName(job, step uint32, node string) string {
	return fmt.Sprintf("slurm_bcast_%d.%d_%s", job, step, node)
}
