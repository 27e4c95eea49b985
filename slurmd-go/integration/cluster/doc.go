// Package cluster runs a private, real Slurm cluster for integration tests: an
// unmodified slurmctld and N node daemons, either the stock slurmd or bin/slurmd-go,
// started with the same flags, of one Slurm release (release.go: $TIEE_SLURM_RELEASE,
// 22.05 on the host, 24.11 and 26.05 in the Debian chroots of scripts/chroots.sh),
// with auth/munge (the host's munged, shared with the chroots) or auth/slurm
// ($TIEE_AUTH=slurm: a fresh slurm.key per cluster, no munged).
//
// In a chroot release every Slurm process of the cluster, daemons and client
// commands alike, runs inside the chroot (exec.go wrapCommand: chroot, env --chdir,
// setpriv for the ordinary user, who is created there with the host's ids); an
// auth/slurm cluster also gets its own mount namespace with private /run/slurm and
// /run/slurmctld, where the daemons' SACK sockets live (see startMountNS).
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
// (scripts/install-deps.sh), for 24.11 and 26.05 their chroots (built and mounted on
// first use by scripts/chroots.sh) and, for Impl "go", bin/slurmd-go. Missing pieces
// are a t.Fatal, never a skip.
package cluster
