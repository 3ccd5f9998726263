#!/usr/bin/env bash
# Builds the module against the lowest etcd release it supports, as an
# embedder whose own go.mod pins that release would: every etcd module at
# ETCD_LOWEST (default v3.7.0) in a copy of go.mod, everything else as
# pinned. CI runs it; it needs the module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
# The library's module alone (its go.mod reaches the light leaves through
# replace lines), as an embedder builds it.
export GOWORK=off
lowest=${ETCD_LOWEST:-v3.7.0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp go.mod "$dir/go.mod"
cp go.sum "$dir/go.sum"
edits=()
for m in $(go list -m -f '{{if not .Indirect}}{{.Path}}{{end}}' all | grep '^go.etcd.io/etcd/'); do
  edits+=("-require=$m@$lowest")
done
go mod edit -modfile="$dir/go.mod" "${edits[@]}"
# The lowest versions' own requirements may be older: let go resolve
# them, in the copy only.
GOFLAGS=-mod=mod go mod download -modfile="$dir/go.mod" >/dev/null 2>&1 || true
GOFLAGS=-mod=mod go build -modfile="$dir/go.mod" ./...
echo "lowest-etcd: the module builds with etcd $lowest ($(go list -modfile="$dir/go.mod" -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) selected)"
