// Package stepio is the step manager's side of srun's I/O streams
// (slurmstepd io.c, wire format io_hdr.c; protocol reference §2C).
//
// The stepd connects to srun's I/O port, sends an init message carrying the
// credential signature as io_key and the number of stdout and stderr streams
// (stdout_objs/stderr_objs), then both sides exchange frames: a 10-byte
// header (type, gtaskid, ltaskid, length) and at most MaxMsgLen bytes.
// STDOUT/STDERR flow to srun, one empty frame per stream marks its EOF, and
// srun closes the connection after counting all of them, so the counts must
// be exact. STDIN (one task) and ALLSTDIN (every task) flow back, an empty
// frame closing the task's stdin; CONNECTION_TEST is answered in kind.
//
//	          task pipes                       TCP, one per client
//	stdout ─┐                                ┌─> srun     (attached first)
//	stderr ─┼─ stream goroutine ─ frame ─────┼─> sattach  (attached later)
//	  ...  ─┘   (blocks while a client's     └─> ...
//	             bounded queue is full)
//	stdin  <── per-task queue <── client reader goroutines (all clients)
//
// Memory is bounded: MaxClientQueuedBytes per client, StdinQueueFrames per
// task, one read buffer per stream and ReplayFrames frames of replay cache.
// A client whose socket accepts nothing for the stall timeout is dropped;
// with no client left, task output is read and discarded.
//
// The package depends on nothing else in the daemon.
package stepio
