// Package topoapi owns the node daemon's local topology API: a unix socket
// in SlurmdSpoolDir (SocketName, mode 0666, because SPANK's user_init runs
// with the job user's euid) where the tiee_topology SPANK plugin asks, for
// the nodes of a step, each node's slurmd address and port and its network
// zone (the leaf switch of topology.conf's topology/tree) and block
// (topology/block's BlockName). It also owns the topology.conf reader.
//
// Protocol v1, one request per connection, text lines:
//
//	client: TIEE-TOPOLOGY 1 NODES n1,n2,n3\n
//	server: node n1 addr 10.0.0.1 port 6818 zone za block -\n   (one per node, request order, duplicates once)
//	        node n9 addr - port - zone - block -\n             (a node slurm.conf does not name)
//	        end\n
//	or:     error <message>\n                                   (bad request, unsupported version)
//
// The server reads its answers from a Source (ConfSource: slurm.conf and the
// topology.conf beside it), so that it can be tested alone. It never uses
// the RPC server's event loops: requests are rare (one per step and node)
// and a goroutine per connection, bounded by MaxConns, is enough.
package topoapi
