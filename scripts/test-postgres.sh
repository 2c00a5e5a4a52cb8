#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the tests and prints its URL:
#   scripts/test-postgres.sh start DIR   -> prints postgres://… on stdout
#   scripts/test-postgres.sh stop DIR
# The server runs as the `postgres` system user (initdb refuses root), listens
# on 127.0.0.1 on a free port, and keeps everything under DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
cmd=${1:?start|stop}
dir=${2:?data folder}
bin=$(pg_bin) || { echo "PostgreSQL server binaries not found (scripts/install-tools.sh --test installs them)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(free_port)
    as_pg "$bin/initdb" -D "$dir/data" -U kubebyon --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c max_connections=200" start >/dev/null
    echo "postgres://kubebyon@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -d "$dir/data" ]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true; fi
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
