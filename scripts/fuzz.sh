#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a short time each (go test -fuzz takes one target at a time).
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
fail=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for fn in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    echo "== fuzz ./$dir $fn ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "./$dir"; then fail=1; fi
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
exit $fail
