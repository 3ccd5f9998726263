#!/usr/bin/env bash
# Runs a one-replica OpenStack Swift on loopback from Debian's packages
# (swift-proxy, swift-account, swift-container, swift-object, memcached),
# all its state under DIR, for the store tests:
#   run.sh DIR PROXY_PORT ACCOUNT_PORT CONTAINER_PORT OBJECT_PORT MEMCACHE_PORT
# tempauth's user test:tester (key testing) owns account AUTH_test. The
# proxy runs slo, dlo and bulk as Swift's own sample does. The servers run
# in this process group (but see below); the script exits when any of them
# does.
set -euo pipefail
dir=$1 proxy=$2 account=$3 container=$4 object=$5 memcache=$6
conf="$dir/etc"
mkdir -p "$conf" "$dir/devices/d1" "$dir/run"

cat >"$conf/swift.conf" <<CONF
[swift-hash]
swift_hash_path_suffix = etcdkit-test
swift_hash_path_prefix = etcdkit-test
[storage-policy:0]
name = Policy-0
default = yes
[swift-constraints]
CONF

common="[DEFAULT]
swift_dir = $conf
devices = $dir/devices
mount_check = false
bind_ip = 127.0.0.1
workers = 0
log_facility = LOG_LOCAL0
log_level = WARNING
log_udp_host =
"
server() { # kind port
  cat >"$conf/$1-server.conf" <<CONF
$common
bind_port = $2
[pipeline:main]
pipeline = $1-server
[app:$1-server]
use = egg:swift#$1
[$1-replicator]
[$1-auditor]
[$1-updater]
[$1-sweeper]
CONF
}
server account "$account"
server container "$container"
server object "$object"

cat >"$conf/proxy-server.conf" <<CONF
$common
bind_port = $proxy
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempauth copy slo dlo proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
allow_account_management = true
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
user_test2_tester2 = testing2 .admin
[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$memcache
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:bulk]
use = egg:swift#bulk
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
CONF

# One device, one replica, one zone: rings built once per directory.
if [[ ! -f "$conf/object.ring.gz" ]]; then
  for kind in account container object; do
    port_var=$kind
    swift-ring-builder "$conf/$kind.builder" create 8 1 1 >/dev/null
    swift-ring-builder "$conf/$kind.builder" add r1z1-127.0.0.1:${!port_var}/d1 1 >/dev/null
    swift-ring-builder "$conf/$kind.builder" rebalance >/dev/null
  done
fi

# Swift's servers leave the process group (setsid): their PIDs are kept
# for whoever stops them (internal/emulator).
pids="$dir/run/pids"
: >"$pids"
memcached -u "$(id -un)" -l 127.0.0.1 -p "$memcache" -U 0 &
echo $! >>"$pids"
for kind in account container object proxy; do
  "swift-$kind-server" "$conf/$kind-server.conf" &
  echo $! >>"$pids"
done
wait -n
