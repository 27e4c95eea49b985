#!/usr/bin/env bash
# gotest-summary.sh LOG -- go test ARGS...: runs go test -v, keeps the whole output
# in LOG and, when it fails, repeats the failing tests' assertion and log lines at
# the end (and in LOG.failures), so that a CI log cut to its last lines still names
# the cause (the harness prints long daemon-log tails after a failure).
set -o pipefail
log=$1
shift
[ "$1" = "--" ] && shift
mkdir -p "$(dirname "$log")"
"$@" 2>&1 | tee "$log"
rc=$?
# LOG.failures: the failed tests' own lines (integration.sh prints every run's at its end)
rm -f "$log.failures"
if [ $rc -ne 0 ]; then
	{
		grep -E '^(panic:|--- FAIL)' "$log" | head -5
		awk -v MAX=40 -f "$(dirname "$0")/failed-lines.awk" "$log"
	} >"$log.failures"
	echo "==== summary of $log (exit $rc): the failed tests' lines"
	cat "$log.failures"
fi
exit $rc
