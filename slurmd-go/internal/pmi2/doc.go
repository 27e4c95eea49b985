// Package pmi2 is the protocol logic of Slurm's mpi/pmi2 plugin as its step
// manager side runs it (stock: src/plugins/mpi/pmi2, the same wire in 22.05,
// 24.11 and 26.05): the PMI-1 ("cmd=... k=v\n") and PMI-2 (6-digit length,
// "cmd=...;k=v;") servers of a node's tasks, the KVS, and the fence along
// the step's tree of step managers up to srun.
//
//	task ─PMI_FD─▶ ServeTask ─ put ─▶ temp KVS ─┐
//	                 │ barrier_in / kvs-fence    │ all local tasks and
//	                 ▼                           ▼ all children in
//	child stepd ─▶ HandleTree(KVS_FENCE) ──▶ Transport.Up (parent stepd
//	                                          through REQUEST_FORWARD_DATA,
//	                                          or srun over TCP)
//	srun ─▶ HandleTree(KVS_FENCE_RESP) ─▶ KVS ─▶ barrier_out / kvs-fence-response to every task
//
// The package owns no sockets: the step manager (internal/stepd) gives it
// each task's connection and each tree connection, and a Transport for
// the messages it sends up the tree. Spawn, ring and job connect are
// answered with an error.
package pmi2
