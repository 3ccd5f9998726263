#!/usr/bin/env bash
# The project's test command: installs the pinned store emulators when they
# are missing, then runs every test of the module, and of deploy/monitoring
# (a module of its own: it checks the alerting rules and the dashboard with
# Prometheus' own parsers, which stay out of etcdkit's dependencies). Extra arguments go to
# go test (for example -run Conformance -v). The race detector is on: the
# stores move bytes between goroutines.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-emulators.sh
# From here on a missing emulator fails its tests instead of skipping them.
export ETCDKIT_REQUIRE_EMULATORS=1
go test -race ./... "$@"
(cd deploy/monitoring && go test ./...)
