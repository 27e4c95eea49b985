// Package suspend owns a step's suspend and resume: each is an explicit
// chain of named stages (suspend: SIGTSTP, grace, SIGSTOP; resume:
// SIGCONT) that runs on its own goroutine, apart from the request that
// started it, and whose progress and suspended state are written to a
// file after every stage. A process that finds the file (a restarted step
// manager, or the daemon looking at its steps) knows which stages ran and
// whether the step is stopped; Machine.Continue runs what is left. A new
// stage (a GPU checkpoint to host memory before SIGSTOP, its restore after
// SIGCONT) is one more entry in the list the caller gives.
//
// The package knows nothing of processes or sockets: stages are closures.
package suspend
