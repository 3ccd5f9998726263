#!/usr/bin/env bash
# The project's test command: installs the pinned store emulators when they
# are missing, then runs every test of the module. Extra arguments go to
# go test (for example -run Conformance -v). The race detector is on: the
# stores move bytes between goroutines.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-emulators.sh
# From here on a missing emulator fails its tests instead of skipping them.
export ETCDKIT_REQUIRE_EMULATORS=1
go test -race ./... "$@"
