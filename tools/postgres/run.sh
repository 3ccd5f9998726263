#!/usr/bin/env bash
# Runs PostgreSQL from Debian's package for the tests: a cluster in DIR
# (made on first run, trusting local connections: test data, no secrets),
# listening on 127.0.0.1:PORT and a socket in DIR, in the foreground.
# PostgreSQL refuses to run as root: as root it runs as the package's
# postgres user. Usage: run.sh DIR PORT
set -euo pipefail
dir=$1 port=$2
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as=()
if [[ $(id -u) == 0 ]]; then
  chown postgres "$dir"
  as=(runuser -u postgres --)
fi
if [[ ! -f $dir/data/PG_VERSION ]]; then
  "${as[@]}" "$bin/initdb" -D "$dir/data" --auth=trust --username=postgres --no-sync >"$dir/initdb.log" 2>&1
fi
# fsync off: the tests' data need not survive the machine.
exec "${as[@]}" "$bin/postgres" -D "$dir/data" -h 127.0.0.1 -p "$port" -k "$dir" -c fsync=off -c synchronous_commit=off -c full_page_writes=off
