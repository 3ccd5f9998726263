#!/usr/bin/env bash
# govulncheck (pinned in tools/audit) over what etcdkit ships: both binaries
# and the etcd 3.5 and 3.6 servers the wrapper's images carry (tools/etcd35,
# tools/etcd36), built as tools/image.sh builds them. It fails on a known
# vulnerability in code the binaries hold (what the linker kept: the code
# that can be reached); one in a dependency they do not call is listed by
# -show verbose only.
#
#   tools/vulncheck.sh [BINARY…]   scan these binaries instead (a release's)
#   tools/vulncheck.sh --source    scan the packages from source instead:
#                                  the call graph, slower and more precise,
#                                  for looking into a finding
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
got=$(cd "$here/audit" && go mod download -json "golang.org/x/vulndb@$vulndb")
if [[ $got != *"\"Sum\": \"$sum\""* ]]; then
  echo "vulncheck: golang.org/x/vulndb@$vulndb is not the pinned $sum:" >&2
  echo "$got" >&2
  exit 1
fi
dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$got")
db=file://$dir/data/osv
govulncheck() { go tool -modfile="$here/audit/go.mod" govulncheck -db "$db" "$@"; }

# The canary calls a function with a known vulnerability: a scan that does
# not find it read no database, and would pass anything.
if [[ ${1:-} == --source ]]; then
  mode=(); canary=(-C "$here/audit/testdata/canary" ./...)
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here/audit/testdata/canary" && go build -o "$tmp/canary" .)
  mode=(-mode binary); canary=("$tmp/canary")
fi
status=0
out=$(govulncheck "${mode[@]}" "${canary[@]}" 2>&1) || status=$?
if [[ $status != 3 || $out != *GO-2021-0113* ]]; then
  echo "vulncheck: the canary's GO-2021-0113 was not found (exit $status): the database at $db was not read" >&2
  echo "$out" >&2
  exit 1
fi
if [[ ${1:-} == --source ]]; then
  govulncheck -C "$root" ./...
  for minor in 35 36; do
    govulncheck -C "$here/etcd$minor" go.etcd.io/etcd/server/v3
  done
  exit 0
fi
bins=("$@")
if [[ ${#bins[@]} == 0 ]]; then
  # The flags of tools/image.sh and the tests' builds (internal/gobuild):
  # after the tests, only the links are new.
  export CGO_ENABLED=0
  for name in etcd-wrapper etcd-backup; do
    (cd "$root" && go build -trimpath -o "$tmp/$name" "./cmd/$name")
    bins+=("$tmp/$name")
  done
  for minor in 35 36; do
    (cd "$here/etcd$minor" && GOFLAGS=-buildvcs=false go build -trimpath -o "$tmp/etcd$minor" go.etcd.io/etcd/server/v3)
    bins+=("$tmp/etcd$minor")
  done
fi
failed=0
for bin in "${bins[@]}"; do
  echo "vulncheck: $bin" >&2
  govulncheck -mode binary "$bin" || failed=1
done
exit $failed
