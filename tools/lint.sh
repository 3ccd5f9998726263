#!/usr/bin/env bash
# The pinned golangci-lint (tools/go.mod, built outside the workspace) over
# every module go.work lists, in one run. Extra arguments go to it (for
# example --fix).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd tools && GOWORK=off go build -o "$bin/" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
mapfile -t modules < <(sed -n 's/^\t\(\.[^ ]*\)$/\1/p' go.work)
"$bin/golangci-lint" run "$@" "${modules[@]/%//...}"
