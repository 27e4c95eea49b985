#!/usr/bin/env bash
# integration.sh IMPL RUN...: the real-cluster suite once per RUN, one after the other
# (the clusters of two runs at once would share this machine's CPUs and fail on
# timing), each through gotest-summary.sh into its own log. A failing run does not
# stop the next; the script ends with a table of every run's result and wall time
# and fails if any run failed.
#
#   IMPL   go or stock (TIEE_SLURMD_IMPL)
#   RUN    RELEASE/AUTH/TESTS: 22.05/munge/all, 26.05/slurm/subset, ...
#          TESTS is "all" or "subset" (registration, batch, prolog at allocation, srun, sbcast, daemon admin, restart, suspend, gang, extern step, configless, SPANK
#          and pam_slurm_adopt, callerid, TreeWidth forwarding, unconfirmed batch launch, bad input and
#          bad tokens, --container and enable_stepmgr refused, task/affinity said, 24.11 nodes under a 26.05 slurmctld,
#          MPI: TestMPI; not TestMPI_PMIx, as Debian's 26.05 has no srun mpi/pmix plugin),
#          GPU nodes: TestGres*, TestGresBind, TestMetrics, TestGPUHealth)
#
# Logs: bin/logs/integration-RELEASE-AUTH.log (IMPL go) or
# bin/logs/integration-stock-RELEASE-AUTH.log; the table also goes to
# bin/logs/integration[-stock]-times.txt. GO (default go) and INTEGRATION_TIMEOUT
# (default 25m, per run) are honoured.
set -uo pipefail

subset='^(TestCluster_(Steady|Disrupt)|TestBatch|TestSrun|TestRestart|TestSuspend|TestGangScheduling|TestExternStep|TestCallerID|TestLaunchFailed_NoRequeue|TestForwarding_TreeWidth|TestBatchLaunch_Unconfirmed|TestBadInput_(DaemonKeepsServing|Tokens)|TestSbcast|TestBatchPrologAlloc|TestBatch_RegistrationListsRunningJob|TestDaemon_.*|TestContainer_Refused|TestStepmgr_Refused|TestAffinity_Unprovided|TestMixedRelease_2411NodesUnder2605|TestMPI|TestGres|TestGres_PrintGres|TestGres_NVMLMock|TestGresBind|TestMetrics|TestGPUHealth|TestConfigless|TestSpank_.*)$'

impl=${1:?usage: integration.sh go|stock RELEASE/AUTH/all|subset...}
shift
case "$impl" in
go) prefix=integration ;;
stock) prefix=integration-stock ;;
*) echo "integration.sh: IMPL must be go or stock, not '$impl'" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "integration.sh: no RUN given" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
go=${GO:-go}
timeout=${INTEGRATION_TIMEOUT:-25m}
mkdir -p bin/logs
table=()
failed=0
for run in "$@"; do
  IFS=/ read -r rel auth tests <<<"$run"
  case "$tests" in
  all) sel=() ;;
  subset) sel=(-run "$subset") ;;
  *) echo "integration.sh: RUN '$run': TESTS must be all or subset" >&2; exit 2 ;;
  esac
  # Network namespaces of their own (zones) and user namespaces (pyxis-like
  # plugin) cannot be made for daemons in a chroot: those tests are 22.05's; the
  # zone guard needs slurmd-go's topology API.
  skip='^(TestCluster_Zones|TestTopology_Zones|TestSpank_NSJoin)$'
  [ "$rel" = 22.05 ] && skip='^$'
  [ "$rel" = 22.05 ] && [ "$impl" = stock ] && skip='^TestTopology_Zones$'
  sel+=(-skip "$skip")
  log=bin/logs/$prefix-$rel-$auth.log
  echo "==== integration.sh: impl=$impl release=$rel auth=$auth tests=$tests -> $log"
  start=$(date +%s)
  TIEE_SLURMD_IMPL=$impl TIEE_SLURM_RELEASE=$rel TIEE_AUTH=$auth \
    "$here/gotest-summary.sh" "$log" -- "$go" test -tags integration -count=1 -timeout "$timeout" -v "${sel[@]}" ./slurmd-go/integration/...
  rc=$?
  secs=$(($(date +%s) - start))
  result=PASS
  [ $rc -eq 0 ] || { result="FAIL(rc=$rc)"; failed=1; }
  table+=("$(printf '%-6s %-6s %-6s %-12s %dm%02ds  %s' "$rel" "$auth" "$tests" "$result" $((secs / 60)) $((secs % 60)) "$log")")
done
# every failed run's failures again, last, where a log cut to its tail still shows them
for run in "$@"; do
  IFS=/ read -r rel auth _ <<<"$run"
  f=bin/logs/$prefix-$rel-$auth.log.failures
  [ -s "$f" ] && { echo "==== failures of $rel/$auth ($impl)"; head -30 "$f"; }
done
{
  echo "==== integration.sh: impl=$impl"
  printf '%s\n' "${table[@]}"
} | tee "bin/logs/$prefix-times.txt"
exit $failed
