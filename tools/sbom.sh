#!/usr/bin/env bash
# Writes the CycloneDX SBOM of each binary beside it, as BINARY.cdx.json,
# with cyclonedx-gomod (pinned in tools/audit), for tools/image.sh and
# tools/release.sh:
#
#   tools/sbom.sh [--licenses] BINARY…
#
# An SBOM is of the binary as built, read from the module graph Go records
# in it; with --licenses (a release's), each module's license too, as
# evidence, detected in its files in the module cache (minutes of text
# classification for four binaries). No timestamp or serial number: the
# same commit makes the same files.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off
here=$(cd "$(dirname "$0")" && pwd)
licenses=()
if [[ ${1:-} == --licenses ]]; then
  licenses=(-licenses)
  shift
fi
for bin in "$@"; do
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
  if ! log=$(cd "$here/audit" && go tool cyclonedx-gomod bin -json "${licenses[@]}" -noserial -notimestamp -output "$bin.cdx.json" "$bin" 2>&1); then
    echo "sbom.sh: the SBOM of $bin:" >&2
    echo "$log" >&2
    exit 1
  fi
done
