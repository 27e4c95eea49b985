// Package fwddata owns REQUEST_FORWARD_DATA, the RPC through which srun and
// the step managers of mpi/pmi2 and mpi/pmix hand bytes to a unix socket on
// another node (stock: slurmd req.c _rpc_forward_data, slurm_forward_data
// in slurm_protocol_api.c; the same in 22.05, 24.11 and 26.05).
//
//	sender ─▶ Send ─▶ REQUEST_FORWARD_DATA ─▶ node's slurmd ─▶ Deliver
//	                  (address, len, data)     expand %n/%h      │ connect as the
//	                                                            ▼ request's uid/gid
//	                               socket ◀─ htonl(uid), htonl(len), data
//
// Deliver is the node side: it connects to the socket with the
// authenticated sender's identity and writes the frame; its error carries
// the errno stock answers. Send is the sending side: one request to each
// node of a list, node names resolved through slurm.conf.
package fwddata
