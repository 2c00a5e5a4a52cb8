#!/usr/bin/env bash
# The list page against the same bytes as a static file, several times over,
# each time on a fresh release console over a copy of a 10,000-cluster SQLite
# database (seeded through the JSON API on the first run and kept in
# ~/.cache/kubebyon/bench-10k). Prints, per round and binary, the median of 50
# curl launches and of 200 loads on one kept-alive connection, the server's CPU
# per page (from /proc/<pid>/stat, 1,000 pages on one connection) and its RSS
# after that and 20 pages more; then the CPU per request for a few routes.
# A quicker loop than `make bench` while optimising the page.
#
#   scripts/bench-list-page.sh            the fresh build (scripts/build-console.sh)
#   scripts/bench-list-page.sh DIR...     A/B: each DIR holds a `kubebyon` binary and its
#                                         `hash.txt` (copies of earlier builds), same rounds
# ROUNDS (default 3). The assets are the current build's (target/site).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
site=$(bash scripts/build-console.sh)
source scripts/console-env.sh
source scripts/bench-lib.sh
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$(dirname "$KUBEBYON_BIN")")
seeded="${XDG_CACHE_HOME:-$HOME/.cache}/kubebyon/bench-10k"
work=""
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "$work" ] && rm -rf "$work"; rm -f "$site/pkg/bench-list.html"' EXIT

# start BIN_DIR: a console from BIN_DIR on a copy of the seeded data, signed in as admin (cookie jar $jar).
start() {
  work=$(mktemp -d)
  [ -d "$seeded" ] && cp -a "$seeded/." "$work/"
  port=$(free_port)
  serve "$work" "$port" "$1/kubebyon"
  pid=$!
  base="http://127.0.0.1:$port"
  wait_healthy "$port"
  jar="$work/cookies"
  sign_in
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; rm -rf "$work"; work=""; }

if [ ! -d "$seeded" ]; then
  start "${bins[0]}"
  echo "seeding 10,000 clusters into $seeded (once)"
  seq -f '%05g' 1 10000 | xargs -P 8 -I{} curl -fsS -o /dev/null -b "$jar" -H 'content-type: application/json' \
    -d '{"name":"b{}","resources":{"cpu":"1","memory_gib":1,"storage_gib":1},"public_access":{"enabled":false}}' \
    "$base/api/console/clusters"
  kill "$pid"; wait "$pid" || true; pid=""
  mkdir -p "$seeded"; cp -a "$work"/kubebyon.db* "$seeded/"
  rm -rf "$work"; work=""
fi

for round in $(seq 1 "${ROUNDS:-3}"); do
  for bin in "${bins[@]}"; do
    start "$bin"
    curl -fsS -b "$jar" -o "$site/pkg/bench-list.html" "$base/clusters"
    s=$(median "$base/pkg/bench-list.html"); p=$(median "$base/clusters")
    ks=$(keepalive "$base/pkg/bench-list.html"); kp=$(keepalive "$base/clusters")
    c=$(cpu /clusters)
    for q in $(seq 1 20); do curl -fsS -o /dev/null -b "$jar" "$base/clusters?page=$q"; done
    printf '%s round %d: curl: static %s ms, page %s ms = %sx; kept alive: static %s ms, page %s ms = %sx; CPU %s µs per page; RSS %s\n' \
      "$bin" "$round" "$s" "$p" "$(ratio "$p" "$s")" "$ks" "$kp" "$(ratio "$kp" "$ks")" "$c" \
      "$(awk '/VmRSS/{print $2, $3}' "/proc/$pid/status")"
    stop
  done
done

echo "== server CPU per request (1,000 requests on one connection, with the session cookie; ${bins[0]})"
start "${bins[0]}"
curl -fsS -b "$jar" -o "$site/pkg/bench-list.html" "$base/clusters"
for u in /healthz /pkg/bench-list.html /login "/api/console/clusters?page=1" /clusters; do
  printf '%-32s %5s µs\n' "$u" "$(cpu "$u")"
done
