// Package k8stopo turns a Kubernetes Node's labels into the node's Slurm
// placement: its tiers (an ordered list of label keys, coarse to fine,
// becomes the switches from the top of the tree down to the node), its
// block (topology/block, 23.11+) and its features. Values become valid
// Slurm names. A label set that is empty or lacks a configured key is an
// error, never an empty topology: the caller keeps what it had.
// Pure: no client-go here; the daemon's Node watch feeds it.
package k8stopo
