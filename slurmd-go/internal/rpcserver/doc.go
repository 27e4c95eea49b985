// Package rpcserver is slurmd-go's RPC transport: it accepts Slurm node RPC connections,
// frames the one request each connection carries, runs it on a bounded worker pool through a
// Dispatcher, writes the reply and closes. It is the only package in the project that imports
// gnet, and it knows nothing about Slurm beyond the frame (u32 big-endian length, then that
// many bytes; slurm-22.05-protocol.md §1.2) and "one request per connection" (§0).
//
// Two implementations share Config, Dispatcher, the worker pool and Stats:
//
//   - Server: gnet event loops (Multicore, Config.Loops loops, level-triggered, no
//     LockOSThread, no ReusePort). An idle connection costs a small connState and gnet's conn;
//     no goroutine and no timer.
//   - NetServer: plain net, one goroutine per connection, for the bench.
//
// # Connection lifecycle (Server)
//
//	accept ─► OnOpen ─ stopping or Open ≥ MaxConns ─► close (Refused)
//	            │ Context = connState{phase: reading, deadline: now+ConnTimeout},
//	            │ appended to the loop's deadline FIFO (accept order = deadline order)
//	            ▼
//	 ┌──── reading ◄── OnTraffic: Peek(4) short ──► wait
//	 │          │                 length > MaxFrame ──► close (Oversize), nothing written
//	 │          │                 InboundBuffered < 4+length ──► wait
//	 │          │ Peek(4+length), COPY into an owned []byte, Discard(all)
//	 │          ▼
//	 │     dispatched ── pool+queue full ──► Overloaded(frame) ─► Write ─► close (Rejected)
//	 │          │ (later input on the connection is discarded)
//	 │          │ worker: Serve(ctx{deadline}, frame, peer)
//	 │          ├── nil reply ──► Execute on loop: close
//	 │          └── reply ──► AsyncWrite ─► callback on loop:
//	 │                          err / closed ──► nothing (the conn is gone)
//	 │                          outbound empty ──► close
//	 │                          else draining ──► sweep closes once flushed
//	 │
//	 └─ any phase: deadline passed (OnTick → per-loop sweep) ──► close (Timeouts)
//	    peer EOF/RST ──► gnet closes
//	            ▼
//	   OnClose: phase = closed, unlinked; every later callback checks phase and does nothing
//
// # Concurrency
//
// gnet callbacks (OnOpen, OnTraffic, OnClose, AsyncWrite callbacks, Execute runnables) run on
// the connection's event loop; connState and loopState are touched only there. OnTick runs
// on gnet's ticker goroutine and only schedules a sweep on each loop (EventLoop.Execute).
// Workers see a job (owned frame, peer, deadline) and the immutable gnet.Conn/loop pointers;
// they reach the connection only through AsyncWrite and Execute, both safe from any goroutine.
// Callbacks never block and never log above Debug. Counters are atomics.
//
// # Bounds
//
//   - in-flight work: Workers running + QueueDepth queued; beyond that Overloaded answers on
//     the loop.
//   - time: every connection is closed at accept+ConnTimeout whatever its phase; Serve's ctx
//     has the same deadline; a job whose deadline passed while queued is not served.
//   - memory: one request per connection; a frame is buffered by gnet until complete (MaxFrame
//     caps it), then copied once. MaxConns caps descriptors.
//
// # Shutdown
//
// Shutdown refuses new connections (accept then close: gnet has no "stop accepting" short of
// stopping the engine), closes connections still reading, waits for the pool to drain and the
// replies to be written, then stops the engine, which closes the listening socket. If the
// Shutdown ctx expires first, Serve contexts are cancelled and the engine is stopped anyway.
//
// # Known gnet v2.9.7 behaviours handled here
//
//   - accept(2) failing with EMFILE/ENFILE stops the whole engine: Server supervises gnet.Run
//     and restarts it (Stats.Restarts); MaxConns keeps our own connections below the limit.
//   - closing a connection flushes its outbound buffer once and drops what the kernel does not
//     take: a reply larger than the socket send buffer is therefore closed only once gnet's
//     outbound buffer is empty (phase draining).
//   - a peer that half-closes (shutdown(SHUT_WR)) after its request gets no reply from Server:
//     gnet closes on EOF. Slurm clients do not half-close; NetServer would still reply.
//   - gnet's logger is process-global: the last Server started sets it (to our hclog adapter).
package rpcserver
