#!/usr/bin/env bash
# An experiment, not a benchmark of the product: how fast the list page would
# be if its frame were written as text instead of rendered by Leptos
# (docs/performance.md, "what the goal would take"). Run from the repository:
#
#   git apply docs/experiments/list-page-text-frame.patch
#   bash docs/experiments/list-page-text-frame.sh     # builds, measures
#   git checkout src/
#
# The patch adds GET /clusters-proto: the session (the same middleware), the
# same page query and rows_html, around the frame of a /clusters page captured
# from this console (split at <tbody>), with a fresh nonce and its CSP. It
# leaves out the per-request text of the frame (range, pager, user name,
# filter values, locale), a few string pushes. Needs the 10,000-cluster
# database that scripts/bench-list-page.sh seeds once.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh
site=$(bash scripts/build-console.sh)
source scripts/console-env.sh
source scripts/bench-lib.sh
work=$(mktemp -d)
cp -a "${XDG_CACHE_HOME:-$HOME/.cache}/kubebyon/bench-10k/." "$work/"
port=$(free_port)
KUBEBYON_PROTO_FRAME="$work/frame.html" serve "$work" "$port"
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$work" "$site/pkg/bench-list.html"' EXIT
base="http://127.0.0.1:$port"
wait_healthy "$port"
jar="$work/cookies"
sign_in
curl -fsS -b "$jar" -o "$work/frame.html" "$base/clusters"
cp "$work/frame.html" "$site/pkg/bench-list.html"
same() { sed -E 's/(nonce|crossorigin)="[^"]*"/\1=""/g' "$1"; }
curl -fsS -b "$jar" -o "$work/proto.html" "$base/clusters-proto"
cmp -s <(same "$work/frame.html") <(same "$work/proto.html") && echo "same page apart from the nonce" || echo "the pages differ"
for r in 1 2 3; do
  s=$(median "$base/pkg/bench-list.html"); p=$(median "$base/clusters"); q=$(median "$base/clusters-proto")
  ks=$(keepalive "$base/pkg/bench-list.html"); kp=$(keepalive "$base/clusters"); kq=$(keepalive "$base/clusters-proto")
  echo "round $r: curl: static $s ms, page $p ms ($(ratio "$p" "$s")x), text frame $q ms ($(ratio "$q" "$s")x);" \
    "kept alive: static $ks ms, page $kp ms ($(ratio "$kp" "$ks")x), text frame $kq ms ($(ratio "$kq" "$ks")x)"
done
echo "server CPU per request: static $(cpu /pkg/bench-list.html) µs, page $(cpu /clusters) µs, text frame $(cpu /clusters-proto) µs"
