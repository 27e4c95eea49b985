// Package stepapi is the contract between slurmd-go and its step managers
// (bin/slurmstepd-go). It imports neither side: the daemon uses Launch,
// Dial and Scan; the step manager (internal/stepd) uses the same request
// numbers and wire helpers to serve the socket.
//
// # Process model
//
// Launch runs "slurmstepd-go serve" in a new session (setsid) with the
// StartSpec (a versioned JSON document) on fd 3 and a report pipe on fd 4,
// and never waits for it beyond reaping: when the daemon exits, the step
// manager is re-parented to init and keeps running. One process start per
// step, because a Go binary's start-up is most of a step launch. serve
// decodes the 22.05 launch body, writes the batch script (or prepares the
// tasks), listens on the step socket and reports readiness; Launch then
// acknowledges, and only after that acknowledgement does the step manager
// run the job (slurmd's rc/ack exchange with slurmstepd):
//
//	daemon                                 serve (long-lived, own session)
//	  | exec serve, setsid ------------------> |
//	  | spec on fd 3 ------------------------> | setup, listen socket
//	  | <------------------- report {rc,pid} --| (fd 4)
//	  | ack byte on fd 3 --------------------> |
//	  | (returns Handle)                       | run job, complete,
//	                                           | unlink socket, exit
//
// Without the ack (daemon gone, Launch timed out) the step manager undoes
// its setup and exits without running anything.
//
// # The step socket
//
// <SlurmdSpoolDir>/<NodeName>_<jobid>.<stepid>[.<het_comp>] speaks the
// stock slurmstepd protocol of Slurm 22.05 (src/common/stepd_api.c and
// src/slurmd/slurmstepd/req.c): native-endian C ints, a version handshake,
// the peer uid from SO_PEERCRED, then any number of requests on one
// connection. This is what scontrol listpids/pidinfo, pam_slurm_adopt and
// nss_slurm use, so the byte layout matches the C structs field by field.
//
// Step state, as REQUEST_STATE reports it:
//
//	Starting ──(script forked, in its cgroup)──> Running ──(script exited)──> Ending
//	                                                                  │
//	             socket removed once slurmctld acknowledged completion ┘
package stepapi
