// Package sockserve owns the accept loop of the daemon's small local socket
// servers (SACK, the topology API): at most a fixed number of connections
// served at once (the rest wait in the listen backlog), Close and Shutdown
// from any goroutine, a context that closes the listener, accept timeouts
// retried, and Shutdown waiting for the connections in flight. What each
// connection says is the caller's handler. The RPC port is rpcserver's.
package sockserve
