// Package ring owns the allreduce benchmark's data path: the rendezvous of the tasks of one
// Slurm job step through a shared directory, the TCP ring between them (each rank dials its
// successor and accepts its predecessor), the ring all-reduce of a float32 gradient
// (reduce-scatter, then all-gather) with a check of the sum after every iteration, and the
// timings and JSON line that rank 0 reports. cmd/allreduce only parses flags and env.
package ring
