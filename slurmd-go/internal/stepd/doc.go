// Package stepd is the inside of the step manager (bin/slurmstepd-go): it
// runs one step from a stepapi.StartSpec in its own process and session,
// which outlives the daemon that launched it. A batch step runs the job's
// script (step.go, run.go); a tasks step runs srun's tasks with their I/O
// to srun (tasks.go, taskio.go, internal/stepio).
//
//	serve: decode launch, job%05u/slurm_script or task stdio, environment,
//	       step socket ──report──> daemon ──ack──> run:
//	         cgroup + memory limit, stdio opened as the user,
//	         "task" helper: become user, exec script or task
//	         wait (raw status) ── SIGKILL leftovers
//	         REQUEST_COMPLETE_BATCH_SCRIPT or MESSAGE_TASK_EXIT and
//	         REQUEST_STEP_COMPLETE (retried)
//	         unlink script, rmdir, close socket, exit
//
// The socket serves the stock slurmstepd requests throughout (server.go).
// A tasks step whose launch names an MPI plugin gets that plugin's host
// (mpi.go: Prefork before the first fork, per-task environment and files,
// AfterFork, Fini; mpi/pmi2 in mpi_pmi2.go over internal/pmi2).
// The package never imports the daemon's packages (gnet, jobmgr, handlers).
package stepd
