#!/usr/bin/env bash
# govulncheck (pinned in tools/audit) over what etcdkit ships, with the
# standard library of the toolchain it is built with (tools/toolchain.sh).
# It fails on a known vulnerability in code that can be reached.
#
# It reads the call graph of every package of every module and of the etcd
# 3.5 and 3.6 servers the wrapper's images carry (tools/etcd35,
# tools/etcd36), from source, without building them. A vulnerability in a
# dependency the code does not call is listed by -show verbose only.
# Not the binaries: the released ones are stripped (-s -w), and
# govulncheck's binary mode, without their symbols, reports every
# vulnerability of every module they hold (GO-2026-5932, x/crypto's
# openpgp, which no package of theirs imports).
#
# The database is golang.org/x/vulndb's OSV reports at the commit below,
# fetched through the module proxy and checked against its hash (CI
# reaches no other host, vuln.go.dev included). Newer reports arrive by
# raising the pin: the release procedure does (CONTRIBUTING.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$here/toolchain.sh"
vulndb=v0.0.0-20261105234957-e22db6528018
sum=h1:mfngRv0Yoh0VApsXKEN82CjD99kl7mtparN3bs3JnqI=
got=$(cd "$here/audit" && GOWORK=off go mod download -json "golang.org/x/vulndb@$vulndb")
if [[ $got != *"\"Sum\": \"$sum\""* ]]; then
  echo "vulncheck: golang.org/x/vulndb@$vulndb is not the pinned $sum:" >&2
  echo "$got" >&2
  exit 1
fi
dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$got")
db=file://$dir/data/osv
# Built from tools/audit's module (outside the workspace), run over the
# workspace: every module go.work lists, with the versions its build
# selects.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$here/audit" && GOWORK=off go build -o "$bin/" golang.org/x/vuln/cmd/govulncheck)
govulncheck() { "$bin/govulncheck" -db "$db" "$@"; }

# The canary calls a function with a known vulnerability: a scan that does
# not find it read no database, and would pass anything.
status=0
out=$(GOWORK=off govulncheck -C "$here/audit/testdata/canary" ./... 2>&1) || status=$?
if [[ $status != 3 || $out != *GO-2021-0113* ]]; then
  echo "vulncheck: the canary's GO-2021-0113 was not found (exit $status): the database at $db was not read" >&2
  echo "$out" >&2
  exit 1
fi
govulncheck -C "$root" github.com/etcdkit/etcdkit/...
for minor in 35 36; do
  GOWORK=off govulncheck -C "$here/etcd$minor" go.etcd.io/etcd/server/v3
done
