// Package pmix is the step manager's side of `srun --mpi=pmix`: it hosts
// an OpenPMIx server for the step's local tasks in the C helper
// slurmd-go-pmix (slurmd-go/pmixhelper, one process per step per node, run
// as the step's user) and carries what crosses nodes itself, as Slurm's
// mpi/pmix does in slurmstepd.
//
//	Start ──▶ dirs (lib tmpdir in the spool dir, client tmpdir in TmpFS, owned by the user)
//	      ──▶ listener <spool>/stepd-go.pmix.<job>.<step> (REQUEST_FORWARD_DATA lands here)
//	      ──▶ helper: job description in, one environment per local task out
//	serve: helper fence contribution ──▶ every other node of the fence ──▶ all in: result to helper
//	       helper direct-modex request ──▶ the rank's node ──▶ its helper ──▶ answer back
//	Close ──▶ helper told to quit (killed after a bound) ──▶ socket and dirs removed
//
// mpi.conf beside slurm.conf is read at each step (host.go applyConf):
// PMIxCliTmpDirBase, PMIxTimeout, PMIxEnv and PMIxDebug as stock, after
// the step's SLURM_PMIX_* variables; transport keys are only logged.
// A fence that cannot complete within SLURM_PMIX_TIMEOUT (stock's 300 s
// default) is fatal to the step: Config.OnFatal gets the error. The
// package owns the helper's framed protocol (proto.go, described in
// slurmd-go/pmixhelper/README.md), the job description (job.go), the
// inter-node exchange (exchange.go) and the directories (server.go).
package pmix
