#!/usr/bin/env bash
# The project's test command: installs the pinned store emulators when they
# are missing, then runs every test of every module go.work lists (the
# library, the light leaves, the cloud stores, heartbeat, the binaries,
# the examples, the bench and the soak), and of deploy/monitoring
# (a module of its own: it checks the alerting rules and the dashboard with
# Prometheus' own parsers, which stay out of etcdkit's dependencies). Extra
# arguments go to go test (for example -run Conformance -v).
#
# Two tiers, as the concurrency is: the packages that move bytes and
# decisions between goroutines run under the race detector; the binaries'
# end-to-end tests, the examples, the images and the packages without
# goroutines of their own run without it (the race detector slows the
# embedded etcd members those tests start by five to ten times, and finds
# nothing in code that runs in another process).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-emulators.sh
# From here on a missing emulator fails its tests instead of skipping them.
export ETCDKIT_REQUIRE_EMULATORS=1
# The soak's harness drives the binaries as processes: it waits on their
# faults for minutes, and the race detector would only watch the harness
# (and tip the tiers' balance: it is the longest package after the
# binaries' own).
# The GCS and Azure backends start no goroutines of their own: their
# transfers run in store/internal/xfer, raced in its own tests and through
# the S3 backend's, and under the race detector they only slowed the tier.
# Nor does defrag (one member after another): it is not in the raced list.
# Nor does the database reader (internal/database/withbolt): its tests
# read thousands of files page by page, ten times slower raced. Nor do
# the library's flows over the cloud emulators (internal/clouds): the
# Snapshotter, retention and copies they drive are raced in capture's,
# snapshot's and the S3 backend's own tests, and raced here they spent
# two minutes of the race tier mostly waiting on the emulators.
raced='store|snapshot|restore|sidecar|startup|heartbeat|member|etcdclient|tlsfiles|internal|fleet'
# One go test over the workspace: a pattern of the module path matches the
# packages of every module go.work lists (./... would match the root
# module's alone).
module=github.com/etcdkit/etcdkit
unraced=("$module/internal/soak" "$module/store/gcs" "$module/store/azure" "$module/internal/database/withbolt" "$module/internal/clouds")
mapfile -t all < <(go list "$module/...")
mapfile -t race < <(printf '%s\n' "${all[@]}" | grep -E "^$module/($raced)(/|$)" | grep -v -x -F "${unraced[@]/#/-e}")
mapfile -t plain < <(printf '%s\n' "${all[@]}" | grep -v -E "^$module/($raced)(/|$)"; printf '%s\n' "${unraced[@]}")
# The tiers run side by side: their tests mostly wait (on etcd's fsyncs, on
# processes, on timers), and one tier alone keeps the two cores about two
# thirds busy. Their test processes pick ports from slots of their own
# (internal/freeport). The plain tier's output follows the race tier's.
# go test's default timeout (10 minutes a test binary) is shorter than the
# binaries' end-to-end packages take on a busy machine with a cold build
# cache (their TestMain builds both binaries); every command the tests run
# has a deadline of its own, so a hang still fails well before this one.
timeout=(-timeout 30m)
plainout=$(mktemp)
trap 'rm -f "$plainout"' EXIT
go test "${timeout[@]}" "${plain[@]}" "$@" >"$plainout" 2>&1 &
plainrun=$!
status=0
go test -race "${timeout[@]}" "${race[@]}" "$@" || status=1
wait $plainrun || status=1
cat "$plainout"
[[ $status == 0 ]]
(cd deploy/monitoring && GOWORK=off go test ./...)
