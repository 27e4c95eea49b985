#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a short time each (go test -fuzz takes one target at a time).
#
# Go 1.26's fuzz coordinator can end a -fuzztime run with a bare "context deadline exceeded"
# when a busy worker misses the stop deadline (golang/go#75804, fixed in Go 1.27): no failing
# input is written and nothing reproduces. Such a run is repeated once; a target fails when it
# writes a failing input to testdata/fuzz/<target>, or fails twice.
#
# Minimizing a new interesting input may take up to -fuzzminimizetime (60 s by default), far
# past a 10 s -fuzztime: FuzzDecodeLaunchTasks's large seeds stalled its workers for most of
# the run (0 execs/s) and ended in that deadline. Minimizing is bounded to a fraction of the
# run; a failing input is still written, only less minimized.
set -euo pipefail
fuzztime=${1:-10s}
minimizetime=${FUZZMINIMIZETIME:-2s}
cd "$(dirname "$0")/.."
fail=0

corpus_count() { find "$1" -type f 2>/dev/null | wc -l; }

fuzz_one() { # dir fn
  local dir=$1 fn=$2 out before
  before=$(corpus_count "$dir/testdata/fuzz/$fn")
  out=$(mktemp)
  if go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" "./$dir" 2>&1 | tee "$out"; then
    rm -f "$out"; return 0
  fi
  if [ "$(corpus_count "$dir/testdata/fuzz/$fn")" -eq "$before" ] && grep -q '^    context deadline exceeded$' "$out"; then
    rm -f "$out"; return 2
  fi
  rm -f "$out"; return 1
}

while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    echo "== fuzz ./$dir $fn ($fuzztime)"
    rc=0; fuzz_one "$dir" "$fn" || rc=$?
    if [ "$rc" -eq 2 ]; then
      echo "== $fn: coordinator deadline with no failing input (golang/go#75804); running it again"
      rc=0; fuzz_one "$dir" "$fn" || rc=$?
    fi
    if [ "$rc" -ne 0 ]; then fail=1; fi
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
exit $fail
