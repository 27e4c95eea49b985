// Package cluster runs a private, real Slurm 22.05 cluster for integration tests:
// the shared munged, an unmodified slurmctld and N node daemons, either the stock
// /usr/sbin/slurmd or bin/slurmd-go, started with the same flags.
//
//	c := cluster.Start(t, cluster.Options{})          // 4 nodes t1..t4, all idle
//	out := c.MustRun(t, "", "sinfo", "-h", "-N")       // SLURM_CONF is set
//	c.KillNode(t, "t2", syscall.SIGKILL)
//	c.WaitNodes(t, "down|down*", []string{"t2"}, 30*time.Second)
//
// Lifecycle of one daemon managed by the harness:
//
//	         StartNode / Start / RestartCtld
//	(none) ───────────────────────────────────▶ running
//	  ▲                                           │ KillNode(sig) / exits by itself / Stop
//	  └──────────── exited (reaped) ◀─────────────┘
//
// Every daemon is started by the harness, tracked by pid and stopped by pid (SIGTERM,
// then SIGKILL after daemonStopTimeout); nothing else on the machine is touched. The
// daemons also get PR_SET_PDEATHSIG=SIGKILL from a dedicated OS thread, so they die
// with the test binary even when a test panics or times out.
//
// Concurrency: Start, StartNode, KillNode, RestartCtld, StartDynamicNode, SetConf and
// Stop are for the test goroutine; Run, RunEnv, ShowNode, ShowSlurmd, NodeStates and
// the read-only fields are safe from any goroutine.
//
// Jobs (jobs.go): Options.Prolog/Epilog/CgroupConf/Tmpfs make a job-capable cluster;
// WorkDir gives a per-user directory a job may write to; Sbatch/SbatchIn submit with a
// clean environment and return the job id; ShowJob, AllJobs, Squeue and WaitJob read
// `scontrol show job -o` and squeue. Stop cancels leftover jobs before stopping the
// daemons and SIGKILLs, by pid, whatever they left (slurmstepds with files under Dir,
// processes in the cluster's slurm_<NodeName> cgroups), then removes those cgroups.
//
//	c := cluster.Start(t, cluster.Options{Prolog: "#!/bin/sh\nexit 0\n", Tmpfs: true})
//	id := c.Sbatch(t, cluster.TestUser, "#!/bin/bash\nexit 3\n")
//	f := c.WaitJob(t, id, time.Minute, "FAILED") // f["ExitCode"] == "3:0"
//
// The harness needs root, the Debian slurmctld/slurmd/slurm-client/munge packages
// (scripts/install-deps.sh) and, for Impl "go", bin/slurmd-go. Missing pieces are a
// t.Fatal, never a skip.
package cluster
