#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each: 10s by default,
# as CI does; FUZZTIME=5m is the long mode. New inputs that fail land in the
# package's testdata/fuzz, where go test runs them from then on.
# Minimization is capped at 1s: the fuzzer spends up to a minute shrinking
# each new input, and database pages are large inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s -parallel 2 "$pkg" >/tmp/fuzz-$$.log 2>&1 || {
      cat /tmp/fuzz-$$.log
      rm -f /tmp/fuzz-$$.log
      exit 1
    }
    tail -1 /tmp/fuzz-$$.log
  done
done
rm -f /tmp/fuzz-$$.log
