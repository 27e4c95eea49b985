// Package spank is the step manager's side of spank-runner (spank/runner):
// it decides whether a step hosts SPANK plugins (plugstack.conf names one),
// starts the runner on a SOCK_SEQPACKET socketpair and speaks its protocol
// (spank/runner/PROTOCOL.md): the step, its tasks' fds, the go-ahead per task,
// exits, the end. The runner forks the tasks itself, so that plugins' hooks
// run in the processes and with the credentials stock slurmstepd gives them;
// the step manager keeps everything else (cgroups, I/O, accounting).
package spank
