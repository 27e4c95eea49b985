// Package userenv loads a user's login environment for a batch job that asks
// for it (sbatch --get-user-env, or --export=NONE/--export=<list>, which make
// sbatch send SLURM_GET_USER_ENV=1), as slurmd's _get_user_env and
// env_array_user_default (src/common/env.c) do before the step manager starts:
//
//	SLURM_GET_USER_ENV=1 in the launch's environment
//	  -> su - <user> -c "/bin/echo x3; /bin/echo START; <stepd> getenv; /bin/echo STOP"
//	     (environment ENVIRONMENT=BATCH only; stdin and stderr /dev/null; own
//	     process group, from 24.11 own PID and mount namespaces with a fresh
//	     /proc; LoadTimeout to EOF on its stdout, then SIGKILL to the group)
//	  -> the NAME=value lines between the markers (bash functions spanning
//	     lines joined), DISPLAY, ENVIRONMENT and HOSTNAME dropped
//	  -> on failure (22.05, 24.11): StateSaveLocation/env_cache/<user> when
//	     SchedulerParameters has no_env_cache (stock's test is that way round),
//	     and always when GetEnvTimeout=0
//	  -> the launch's environment merged over it (the step manager does that)
//
// sbatch's --get-user-env=<timeout> and its S/L modes never reach the node:
// every release's slurmd waits LoadTimeout and runs "su -".
//
// It also owns "slurmstepd-go getenv" (Dump), the command run inside su: the
// SLURM_RLIMIT_* lines of the login shell's limits, then its environment.
package userenv
