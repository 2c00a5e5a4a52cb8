# shellcheck shell=bash disable=SC2154  # ($jar, $base and $pid are the caller's)
# Timing helpers of scripts/bench.sh, scripts/bench-list-page.sh and
# docs/experiments/list-page-text-frame.sh (sourced, not run). Every load
# sends the cookie jar "$jar".

# serve DIR PORT [BIN]: a release console (no host; BIN defaults to
# $KUBEBYON_BIN) over the data folder DIR on 127.0.0.1:PORT, in the background
# ($! is its pid), logging to DIR/log; lib.sh's wait_healthy PORT waits until it answers.
# Spec writes are not rate-limited here: the benchmarks seed thousands.
serve() {
  KUBEBYON_SPEC_WRITE_LIMIT=off KUBECONFIG="$1/no-host.kubeconfig" LEPTOS_SITE_ADDR="127.0.0.1:$2" KUBEBYON_DATA_DIR="$1" KUBEBYON_ADMIN_PASSWORD="bench-password-123" \
    "${3:-$KUBEBYON_BIN}" serve >"$1/log" 2>&1 &
}

# sign_in: the first admin's session (the password serve gives) into "$jar", at "$base".
sign_in() {
  curl -fsS -c "$jar" -H 'content-type: application/json' \
    -d '{"username":"admin","password":"bench-password-123"}' "$base/api/auth/login" >/dev/null
}

# median URL: median of 50 curl launches (after 5 warm-up loads), in ms.
median() {
  for _ in $(seq 1 5); do curl -fsS -o /dev/null -b "$jar" "$1"; done
  for _ in $(seq 1 50); do curl -fsS -o /dev/null -b "$jar" -w '%{time_total}\n' "$1"; done |
    sort -n | sed -n 25p | awk '{printf "%.3f", $1 * 1000}'
}

# keepalive URL: median of 200 loads on one kept-alive connection (after 20),
# in ms: no process launch or TCP handshake in the figure.
keepalive() {
  local args=()
  for _ in $(seq 1 220); do args+=(-o /dev/null "$1"); done
  curl -fsS -b "$jar" -w '%{time_total}\n' "${args[@]}" | tail -n 200 | sort -n | sed -n 100p | awk '{printf "%.3f", $1 * 1000}'
}

# ratio A B: A / B to two places.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }

# cpu URL: the server's (pid $pid) CPU per request over 1,000 requests on one
# connection, in µs, from /proc/<pid>/stat.
cpu() {
  local tck a b args=()
  tck=$(getconf CLK_TCK)
  a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  for _ in $(seq 1 1000); do args+=(-o /dev/null "$base$1"); done
  curl -fsS -b "$jar" "${args[@]}"
  b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  awk -v a="$a" -v b="$b" -v t="$tck" 'BEGIN{printf "%.0f", (b - a) / t * 1e6 / 1000}'
}
