// Package gres owns a node's generic resources as the node daemon knows them:
// the records that gres.conf and GPU autodetection yield (Slurm's
// gres_slurmd_conf_t), merged as stock slurmd merges them, and the devices
// those records name. It parses no wire format: the registration and
// credential layouts live in pkg/slurmproto, the GPU library in internal/gpu.
package gres
