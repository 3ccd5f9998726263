#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each: 10s by default
# (CI gives 5s: there the instrumented builds cost more than the fuzzing);
# FUZZTIME=5m is the long mode. New inputs that fail land in the
# package's testdata/fuzz, where go test runs them from then on.
# Minimization is capped at 1s: the fuzzer spends up to a minute shrinking
# each new input, and database pages are large inputs.
#
# Go 1.26's fuzz coordinator can report "context deadline exceeded" when
# -fuzztime ends while a worker is mid-call (go.dev/issue/75804, fixed in
# Go 1.27), with no failing input written. That run is repeated, twice at
# most; a failure that writes an input under testdata/fuzz always fails.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# inputs counts the failing inputs kept for a target.
inputs() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    corpus="$pkg/testdata/fuzz/$target"
    for attempt in 1 2 3; do
      echo "fuzz: $pkg $target for $fuzztime"
      before=$(inputs "$corpus")
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s -parallel 2 "$pkg" >"$log" 2>&1; then
        tail -1 "$log"
        break
      fi
      after=$(inputs "$corpus")
      if [ "$after" -eq "$before" ] && grep -q '^    context deadline exceeded$' "$log" && [ "$attempt" -lt 3 ]; then
        echo "fuzz: $target: the coordinator's deadline race (go.dev/issue/75804), no failing input: again"
        continue
      fi
      cat "$log"
      exit 1
    done
  done
done
