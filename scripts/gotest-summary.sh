#!/usr/bin/env bash
# gotest-summary.sh LOG -- go test ARGS...: runs go test -v, keeps the whole output
# in LOG and, when it fails, repeats the failing tests' assertion and log lines at
# the end, so that a CI log cut to its last lines still names the cause (the
# harness prints long daemon-log tails after a failure).
set -o pipefail
log=$1
shift
[ "$1" = "--" ] && shift
mkdir -p "$(dirname "$log")"
"$@" 2>&1 | tee "$log"
rc=$?
if [ $rc -ne 0 ]; then
	echo "==== summary of $log (exit $rc): test-file lines and failures"
	grep -E '^[[:space:]]*(--- FAIL|panic:|[A-Za-z0-9_]+_test\.go:[0-9]+: )' "$log" | grep -v '^[[:space:]]*[A-Za-z0-9_]*_test\.go:[0-9]*: cluster ti' | tail -60
fi
exit $rc
