//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// stockFacts are the stock behaviours the tests pin that changed between the Slurm
// releases the suite runs (cluster.Release). Where a test has a stock reference
// cluster of the same release it compares with it; these are the concrete values
// checked besides, each measured on this machine with that release's stock
// slurmctld, slurmd and client commands (TIEE_SLURMD_IMPL=stock, scripts/integration.sh
// stock).
type stockFacts struct {
	// batchEnvWorkingCluster: the batch shell has SLURM_WORKING_CLUSTER=
	// "<cluster>:127.0.0.1:<SlurmctldPort>:<protocol version>:109" (109: select/cons_tres)
	// and SLURM_NODE_ALIASES=(null). 22.05 only; 24.11 sets neither.
	batchEnvWorkingCluster bool
	// jobTimesInEnv: the batch shell, srun's tasks, the Prolog and the Epilog have
	// SLURM_JOB_START_TIME and SLURM_JOB_END_TIME (epoch seconds: the job's start and
	// start plus its time limit, 365 days for UNLIMITED), and the batch shell has
	// SLURM_OOM_KILL_STEP=0. 24.11 on.
	jobTimesInEnv bool
	// reasonRaisedSignal: a batch job whose shell dies of a signal ends with Reason
	// "RaisedSignal:<n>(<strsignal, '_' for ' '>)"; 22.05 shows "JobLaunchFailure".
	reasonRaisedSignal bool
	// prologErrorOutput is what a failed Prolog leaves in the job's output without
	// PrologFlags=Alloc: 22.05 writes "Error running slurm prolog: 1" to the job's
	// stderr file; 24.11 creates no output file ("").
	prologErrorOutput string
	// prologBatchFlag is BatchFlag of the job requeued held after the failed Prolog:
	// 1 in 22.05, 2 in 24.11 (with and without PrologFlags=Alloc).
	prologBatchFlag string
	// prologAllocExitCode is its ExitCode with PrologFlags=Alloc: "0:0" in 22.05;
	// 24.11 records ESLURMD_PROLOG_FAILED (4022) as a wait status, "0:54"
	// (4022 & 0x7f). Without Alloc both show "0:0".
	prologAllocExitCode string
	// prologReasonKept: after `scontrol update state=resume` the node is idle again
	// and, in 24.11, still shows Reason "Prolog error [root@<time>]"; 22.05 clears it.
	prologReasonKept bool
	// srunTerminating is srun's line when -K terminates the step after a task failed
	// (normalized): 22.05 prints it from its launch/slurm plugin; 24.11 has no such
	// plugin.
	srunTerminating string
	// reconfigureReexec: slurmd answers REQUEST_RECONFIGURE by re-executing itself
	// (slurmd.c _try_to_reconfig; same pid under -D), so `scontrol show slurmd`'s
	// "Last slurmctld msg time" starts again at NONE. 22.05 reconfigures in place.
	reconfigureReexec bool
	// batchStepIDVars: the batch shell has SLURM_STEP_ID and SLURM_STEPID = -5
	// (SLURM_BATCH_SCRIPT as a signed int). 26.05 only.
	batchStepIDVars bool
	// jobSLUID: the batch shell, srun's tasks, the Prolog and the Epilog have
	// SLURM_JOB_SLUID, the job's cluster-unique id ("s" + 13 base-32 digits). 26.05.
	jobSLUID bool
	// patternNIsNodeName: %N in an output file pattern (sbatch -o, srun -o) is the
	// node's NodeName; 22.05 and 24.11 expand it to the host's short name.
	patternNIsNodeName bool
	// stepdLogTimestamp: slurmstepd's own error lines in a job's or step's stderr
	// (the CANCELLED lines) start "[<time with ms>] error: ", and a cancel by signal
	// ends "DUE to SIGNAL <strsignal> ***"; 22.05 and 24.11 write
	// "slurmstepd-<NodeName>: error: " and end the scancel line after the time.
	// `scontrol notify`'s line too (measured in three runs of stock 26.05.5:
	// "[2026-12-01T10:36:51.615] error: hello from scontrol notify").
	stepdLogTimestamp bool
	// taskExitAfterStepComplete: the step manager sends srun the task exits only
	// once slurmctld has taken the step's completion (26.05 slurmstepd:
	// "Rank 0 sent step completion message directly to slurmctld", then
	// stepd_send_pending_exit_msgs), so an srun step whose tasks end while slurmctld
	// is away ends only once it is back. 22.05 and 24.11 tell srun at once.
	taskExitAfterStepComplete bool
	// stepdCreatesOutputDirs: the step manager creates the missing directories of a
	// batch job's output file (sbatch -o no-such-dir/out.txt) and the job runs; 22.05
	// fails it as unopenable (ESLURMD_IO_ERROR).
	stepdCreatesOutputDirs bool
	// doubleSigintAborts: a second SIGINT to srun within a second of the first aborts
	// the step (Ctrl-C Ctrl-C). 26.05's srun never does: it compares the whole
	// seconds left to its one-second deadline (signals.c _handle_intr,
	// timespec_after_deadline(deadline) > 0), which are 0 for a SIGINT 0.2 s later,
	// and prints its status again; measured twice, 20 s without an end.
	doubleSigintAborts bool
	// credCheckedAtUnpack: slurmd checks a launch credential's signature while it
	// unpacks the launch (cred/munge cred_p_unpack, 23.11 on): one signed by an
	// ordinary user or over other fields makes the launch malformed, answered
	// RESPONSE_SLURM_RC ESLURM_PROTOCOL_INCOMPLETE_PACKET; the launch carries no
	// uid of its own (the credential's identity is the step's user), and stock
	// runs a root step an ordinary user sends with root's credential (slurmd-go
	// refuses it, ESLURM_USER_ID_MISSING, as 22.05 does). 22.05 answers every
	// credential refusal RESPONSE_SLURM_RC_MSG ESLURMD_INVALID_JOB_CREDENTIAL.
	credCheckedAtUnpack bool
	// credReplayedRC answers a launch whose credential was used before:
	// ESLURMD_CREDENTIAL_REPLAYED in 22.05; 24.11's _check_job_credential answers
	// every cred_cache_valid failure (replayed, revoked) ESLURMD_INVALID_JOB_CREDENTIAL.
	credReplayedRC uint32
	// slurmdHTTP: the slurmd port also serves HTTP (26.05: rpc_fingerprint, else
	// http_switch), so bytes that do not look like an RPC of a known protocol version
	// (a frame too short for a header, header version 0x1000) get an HTTP error
	// answer; 22.05 and 24.11 close the connection.
	slurmdHTTP bool
	// getUserEnvArg: sbatch takes --get-user-env=[<timeout>][S|L] (neither part
	// reaches the node); 26.05's --get-user-env takes no argument ("option
	// '--get-user-env' doesn't allow an argument").
	getUserEnvArg bool
	// userEnvFailureDrains: when su cannot load a --get-user-env job's login
	// environment (TestUser's shell is nologin), slurmd fails the launch
	// (ESLURMD_SETUP_ENVIRONMENT_ERROR): the job is requeued held ("user env
	// retrieval failed requeued held") and the node drained ("Job env setup
	// error"). 26.05; 22.05 and 24.11 run the job with the passed environment
	// unless SchedulerParameters has no_env_cache or requeue_setup_env_fail.
	userEnvFailureDrains bool
}

var releaseFacts = map[string]stockFacts{
	"22.05": { // 22.05.8, the host's Debian 12 packages
		batchEnvWorkingCluster: true,
		prologErrorOutput:      "Error running slurm prolog: 1\n",
		prologBatchFlag:        "1",
		prologAllocExitCode:    "0:0",
		credReplayedRC:         slurmproto.ESlurmdCredentialReplayed,
		srunTerminating:        "srun: launch/slurm: _step_signal: Terminating StepId=<JOB>.0",
		doubleSigintAborts:     true,
		getUserEnvArg:          true,
	},
	"24.11": { // 24.11.5, Debian trixie
		jobTimesInEnv:          true,
		reasonRaisedSignal:     true,
		prologBatchFlag:        "2",
		prologAllocExitCode:    "0:54",
		prologReasonKept:       true,
		srunTerminating:        "srun: Terminating StepId=<JOB>.0",
		reconfigureReexec:      true,
		stepdCreatesOutputDirs: true,
		doubleSigintAborts:     true,
		credCheckedAtUnpack:    true,
		credReplayedRC:         slurmproto.ESlurmdInvalidJobCredential,
		getUserEnvArg:          true,
	},
	"26.05": { // 26.05.5, Debian sid
		jobTimesInEnv:             true,
		reasonRaisedSignal:        true,
		prologBatchFlag:           "2",
		prologAllocExitCode:       "0:54",
		srunTerminating:           "srun: Terminating StepId=<JOB>.0",
		reconfigureReexec:         true,
		batchStepIDVars:           true,
		jobSLUID:                  true,
		patternNIsNodeName:        true,
		stepdLogTimestamp:         true,
		taskExitAfterStepComplete: true,
		stepdCreatesOutputDirs:    true,
		credCheckedAtUnpack:       true,
		credReplayedRC:            slurmproto.ESlurmdInvalidJobCredential,
		slurmdHTTP:                true,
		userEnvFailureDrains:      true,
	},
}

// factsOf returns the stock facts of c's release.
func factsOf(t *testing.T, c *cluster.Cluster) stockFacts {
	t.Helper()
	f, ok := releaseFacts[c.Release]
	if !ok {
		t.Fatalf("no stock facts measured for Slurm %s (release_facts_test.go)", c.Release)
	}
	return f
}

// jobTimeVars are the job-time variables of 24.11 on (stockFacts.jobTimesInEnv). Their
// values are the job's own times, which differ between two clusters: compareEnv
// checks only that they are times, and the tests check them against the job.
var jobTimeVars = []string{"SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"}

// jobIDVars are variables holding an id unique to the job (stockFacts.jobSLUID), by
// the form of their value: compareEnv checks the form instead of the value.
var jobIDVars = map[string]*regexp.Regexp{
	"SLURM_JOB_SLUID": regexp.MustCompile(`^s[0-9A-Z]{13}$`),
}

// stepdErrorRe is the start of the line slurmstepd writes into a job's stderr for an
// error of its own on node host, as a regular expression (stockFacts.stepdLogTimestamp).
func stepdErrorRe(f stockFacts, host string) string {
	if f.stepdLogTimestamp {
		return `\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] error: `
	}
	return regexp.QuoteMeta(stepdLine(host, ""))
}

// stepdLineRe matches the whole line slurmstepd writes into a job's stderr for msg (an
// error of its own or a `scontrol notify` text) on node host.
func stepdLineRe(f stockFacts, host, msg string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + stepdErrorRe(f, host) + regexp.QuoteMeta(msg) + `$`)
}

// patternHost is what %N expands to in an output file pattern on node (its NodeName
// or the host's short name, stockFacts.patternNIsNodeName).
func patternHost(t *testing.T, f stockFacts, node string) string {
	t.Helper()
	if f.patternNIsNodeName {
		return node
	}
	return hostShortName(t)
}

// checkJobTimes checks SLURM_JOB_START_TIME and SLURM_JOB_END_TIME of env against the
// job's `scontrol show job` fields: the start is StartTime; the end is StartTime
// plus span (the time limit; the Prolog, the batch shell and srun's tasks see it),
// or, with span 0, EndTime (the Epilog sees the job's real end).
func checkJobTimes(t *testing.T, what string, env, job map[string]string, span time.Duration) {
	t.Helper()
	checkEnvTime(t, what, env, jobTimeVars[0], job, "StartTime")
	if span == 0 {
		checkEnvTime(t, what, env, jobTimeVars[1], job, "EndTime")
	} else if got, ok := jobTimeSpan(env); !ok || got != span {
		t.Errorf("%s: %s - %s = %v (valid %v), want %v", what, jobTimeVars[1], jobTimeVars[0], got, ok, span)
	}
}

// unlimitedSpan is SLURM_JOB_END_TIME - SLURM_JOB_START_TIME of a job without a time
// limit: slurmctld's end time of an UNLIMITED job is its start plus a year.
const unlimitedSpan = 365 * 24 * time.Hour

// jobTimeSpan is SLURM_JOB_END_TIME - SLURM_JOB_START_TIME of env (ok false if either
// is missing or not a number).
func jobTimeSpan(env map[string]string) (time.Duration, bool) {
	s, err1 := strconv.ParseInt(env[jobTimeVars[0]], 10, 64)
	e, err2 := strconv.ParseInt(env[jobTimeVars[1]], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(e-s) * time.Second, true
}

// checkEnvTime checks the epoch seconds of env's variable against the job's field
// (`scontrol show job`, whole seconds, local time).
func checkEnvTime(t *testing.T, what string, env map[string]string, variable string, job map[string]string, field string) {
	t.Helper()
	tm, err := cluster.ParseSlurmTime(job[field])
	if err != nil {
		t.Errorf("%s: job %s %q: %v", what, field, job[field], err)
		return
	}
	if got, want := env[variable], fmt.Sprint(tm.Unix()); got != want {
		t.Errorf("%s: %s=%q, want %s (%s %s)", what, variable, got, want, field, job[field])
	}
}
