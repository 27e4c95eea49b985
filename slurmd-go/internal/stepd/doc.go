// Package stepd is the inside of the step manager (bin/slurmstepd-go): it
// runs one batch step from a stepapi.StartSpec in its own process, which
// outlives the daemon that launched it.
//
//	start ──exec──> serve: decode launch, job%05u/slurm_script, environment,
//	                       step socket ──report──> daemon ──ack──> run:
//	                         cgroup + memory limit, stdio opened as the user,
//	                         "task" helper: become user, exec script
//	                         wait (raw status) ── SIGKILL leftovers
//	                         REQUEST_COMPLETE_BATCH_SCRIPT (retried)
//	                         unlink script, rmdir, close socket, exit
//
// The socket serves the stock slurmstepd requests throughout (server.go).
// The package never imports the daemon's packages (gnet, jobmgr, handlers).
package stepd
