#!/usr/bin/env bash
# The list page against the same bytes as a static file, several times over,
# on a fresh release console over a copy of a 10,000-cluster SQLite database
# (seeded through the JSON API on the first run and kept in
# ~/.cache/kubebyon/bench-10k). Prints, per round, the median of 50 curl
# launches and of 200 loads on one kept-alive connection, then the server's
# CPU per request for a few routes (from /proc/<pid>/stat, 1,000 requests on
# one connection). A quicker loop than `make bench` while optimising the page.
# ROUNDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
site=$(bash scripts/build-console.sh)
source scripts/console-env.sh
seeded="${XDG_CACHE_HOME:-$HOME/.cache}/kubebyon/bench-10k"
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; rm -f "$site/pkg/bench-list.html"' EXIT
[ -d "$seeded" ] && cp -a "$seeded/." "$work/"

# start: a console on the data in $work, signed in as admin (cookie jar $jar).
start() {
  port=$(bash scripts/free-port.sh)
  KUBECONFIG="$work/no-host.kubeconfig" LEPTOS_SITE_ADDR="127.0.0.1:$port" KUBEBYON_DATA_DIR="$work" \
    KUBEBYON_ADMIN_PASSWORD="bench-password-123" "$KUBEBYON_BIN" serve >"$work/log" 2>&1 &
  pid=$!
  base="http://127.0.0.1:$port"
  until curl -fsS "$base/healthz" >/dev/null 2>&1; do sleep 0.1; done
  jar="$work/cookies"
  curl -fsS -c "$jar" -H 'content-type: application/json' \
    -d '{"username":"admin","password":"bench-password-123"}' "$base/api/auth/login" >/dev/null
}
start
if [ ! -d "$seeded" ]; then
  echo "seeding 10,000 clusters into $seeded (once)"
  seq -f '%05g' 1 10000 | xargs -P 8 -I{} curl -fsS -o /dev/null -b "$jar" -H 'content-type: application/json' \
    -d '{"name":"b{}","resources":{"cpu":"1","memory_gib":1,"storage_gib":1},"public_access":{"enabled":false}}' \
    "$base/api/console/clusters"
  kill "$pid"; wait "$pid" || true
  mkdir -p "$seeded"; cp -a "$work"/kubebyon.db* "$seeded/"
  start
fi

# median URL: of 50 curl launches after 5, in ms.
median() {
  for _ in $(seq 1 5); do curl -fsS -o /dev/null -b "$jar" "$1"; done
  for _ in $(seq 1 50); do curl -fsS -o /dev/null -b "$jar" -w '%{time_total}\n' "$1"; done |
    sort -n | sed -n 25p | awk '{printf "%.3f", $1 * 1000}'
}
# keepalive URL: of 200 loads on one connection after 20, in ms.
keepalive() {
  local args=()
  for _ in $(seq 1 220); do args+=(-o /dev/null "$1"); done
  curl -fsS -b "$jar" -w '%{time_total}\n' "${args[@]}" | tail -n 200 | sort -n | sed -n 100p | awk '{printf "%.3f", $1 * 1000}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }

curl -fsS -b "$jar" -o "$site/pkg/bench-list.html" "$base/clusters"
for round in $(seq 1 "${ROUNDS:-3}"); do
  s=$(median "$base/pkg/bench-list.html"); p=$(median "$base/clusters")
  ks=$(keepalive "$base/pkg/bench-list.html"); kp=$(keepalive "$base/clusters")
  echo "round $round: curl: static $s ms, page $p ms = $(ratio "$p" "$s")x; kept alive: static $ks ms, page $kp ms = $(ratio "$kp" "$ks")x"
done

echo "== server CPU per request (1,000 requests on one connection, with the session cookie)"
tck=$(getconf CLK_TCK)
for u in /healthz /pkg/bench-list.html /login "/api/console/clusters?page=1" /clusters; do
  a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  args=()
  for _ in $(seq 1 1000); do args+=(-o /dev/null "$base$u"); done
  curl -fsS -b "$jar" "${args[@]}"
  b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  printf '%-32s %5.0f µs\n' "$u" "$(awk -v a="$a" -v b="$b" -v t="$tck" 'BEGIN{print (b - a) / t * 1e6 / 1000}')"
done
