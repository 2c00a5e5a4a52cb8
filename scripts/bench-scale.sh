#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2034  # on_exit's commands are single-quoted on purpose: evaluated at exit
# `make bench-scale`: the figures of a thousand clusters on one host (issue
# 26), not pass/fail, and not part of `make test`:
#  - the observer's database reads per pass with 10,000 clusters in the
#    database (tests/observer.rs, bench_observer_reads; KUBEBYON_BENCH_DB_CLUSTERS);
#  - the console's RSS per watched cluster, at 100, 400, 700 and 1,000
#    clusters on the light host profile (tests/scale_bench.rs;
#    KUBEBYON_BENCH_POINTS, KUBEBYON_BENCH_RUNS: default 3 runs);
#  - 1,000 open detail pages of 10 users against a release console, nothing
#    changing, for 60 s: streams accepted, heartbeats, the server's CPU
#    (tests/live.rs, bench_open_pages; KUBEBYON_BENCH_PER_USER, KUBEBYON_BENCH_SECS);
#  - from a vCluster pod's Ready transition to an open detail page showing
#    Ready, in Chromium, on the upstream test host (relay), p50/p95
#    (end2end/bench/ready-latency.spec.ts; KUBEBYON_BENCH_LATENCY_CLUSTERS, default 20);
#  - 1,000 clusters switched NodePort -> LoadBalancer by the console against a
#    bare kube-rs client, on the light host profile (tests/scale_bench.rs,
#    bench_move_to_load_balancer; KUBEBYON_BENCH_MOVE_CLUSTERS), and 200 on
#    the full upstream test host (tests/reconciler_bench.rs;
#    KUBEBYON_BENCH_FULL_CLUSTERS).
# KUBEBYON_BENCH_ONLY (e.g. "pages,latency") runs only the named sections of
# observer, memory, pages, latency, move, move-full.
# The list page against a static file stays in `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# The tools the builds need (wasm-bindgen, npm's wasm-opt, the browser's
# Playwright), as `make test` installs them: a fresh clone has none.
bash scripts/install-tools.sh --test >/dev/null
echo "# make bench-scale, $(date -u '+%Y-%m-%d %H:%M UTC'), main $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
control_plane="$(bash scripts/build-control-plane.sh | tail -n 1)"
export KUBEBYON_CONTROL_PLANE_DIR="$control_plane"
export PATH="$control_plane:$PATH"

only() { [[ -z "${KUBEBYON_BENCH_ONLY:-}" || ",$KUBEBYON_BENCH_ONLY," == *",$1,"* ]]; }

if only observer; then
echo "== observer: database reads per pass (cargo test --test observer bench_observer_reads -- --ignored)"
cargo test --quiet --features ssr --test observer bench_observer_reads -- --ignored --nocapture 2>&1 |
  grep -E '^(==|first|nothing|[0-9]+ changed)'
fi

bash scripts/build-console.sh >/dev/null
source scripts/console-env.sh
source scripts/bench-lib.sh
cargo test --quiet --features ssr --test live --test scale_bench --no-run 2>/dev/null

if only memory; then
echo "== console memory per watched cluster (cargo test --test scale_bench bench_memory_per_cluster -- --ignored; light host profile)"
for run in $(seq 1 "${KUBEBYON_BENCH_RUNS:-3}"); do
  echo "run $run:"
  cargo test --quiet --features ssr --test scale_bench bench_memory_per_cluster -- --ignored --nocapture 2>&1 | grep -E '^( *[0-9]+ clusters|slope|console pid)'
done
fi

work=$(mktemp -d)
on_exit 'rm -rf "$work"'
if only pages; then
echo "== open detail pages (cargo test --test live bench_open_pages -- --ignored, against a release console)"
port=$(free_port)
serve "$work" "$port"
pid=$!
on_exit 'kill "$pid" 2>/dev/null'
wait_healthy "$port"
base="http://127.0.0.1:$port"
users=${KUBEBYON_BENCH_USERS:-10}
: >"$work/pages"
for u in $(seq 1 "$users"); do
  KUBEBYON_DATA_DIR="$work" KUBEBYON_ADMIN_PASSWORD="bench-password-123" "$KUBEBYON_BIN" admin --username "viewer$u" >/dev/null
  jar="$work/jar$u"
  curl -fsS -c "$jar" -H 'content-type: application/json' \
    -d "{\"username\":\"viewer$u\",\"password\":\"bench-password-123\"}" "$base/api/auth/login" >/dev/null
  id=$(curl -fsS -b "$jar" -H 'content-type: application/json' \
    -d "{\"name\":\"open$u\",\"resources\":{\"cpu\":\"1\",\"memory_gib\":1,\"storage_gib\":1},\"public_access\":{\"enabled\":false}}" \
    "$base/api/console/clusters" | jq -r .id)
  cookie=$(awk '$6 == "kubebyon_session" {print $6 "=" $7}' "$jar")
  echo "$cookie $id" >>"$work/pages"
done
echo "server: pid $pid, RSS before $(awk '/VmRSS/{print $2, $3}' /proc/$pid/status)"
KUBEBYON_BENCH_BASE="127.0.0.1:$port" KUBEBYON_BENCH_PID=$pid KUBEBYON_BENCH_PAGES="$work/pages" \
  cargo test --quiet --features ssr --test live bench_open_pages -- --ignored --nocapture 2>&1 | grep -E '^(==|nothing)'
kill "$pid"; wait "$pid" 2>/dev/null || true
fi

if only latency; then
echo "== pod Ready to page Ready (Playwright, end2end/bench/ready-latency.spec.ts, upstream test host in relay mode)"
host_dir="$work/host"
host_kubeconfig=$(KUBEBYON_HOST_DIR="$host_dir" KUBEBYON_HOST_API_PORT=$(free_port) \
  bash scripts/host-up.sh --test-latency --test-net --node-cpu 64 --node-memory 256Gi --node-ephemeral-storage 4Ti \
    --vcluster-api relay | tail -n 1)
on_exit 'KUBEBYON_HOST_DIR="$host_dir" bash scripts/host-down.sh >/dev/null 2>&1'
on_exit '[ -z "${host_console_pid:-}" ] || kill "$host_console_pid" 2>/dev/null'
host_port=$(free_port)
KUBECONFIG="$host_kubeconfig" LEPTOS_SITE_ADDR="127.0.0.1:$host_port" KUBEBYON_DATA_DIR="$work/data-host" \
  KUBEBYON_PROBE_LOOPBACK=1 KUBEBYON_ADMIN_PASSWORD="bench-password-123" "$KUBEBYON_BIN" serve >"$work/console-host.log" 2>&1 &
host_console_pid=$!
wait_healthy "$host_port"
KUBEBYON_HOST_CONSOLE_URL="http://127.0.0.1:$host_port" KUBEBYON_HOST_NET="$(cat "$host_dir/net")" \
  KUBEBYON_HOST_KUBECONFIG="$host_kubeconfig" KUBEBYON_ADMIN_PASSWORD="bench-password-123" \
  npx playwright test --config end2end/bench.config.ts >"$work/latency.log" 2>&1 ||
  { grep -E '✘|Error|expect' "$work/latency.log" >&2; die "the latency benchmark failed (its log: $work/latency.log)"; }
grep -E '^(==|lat-)' "$work/latency.log"
fi

if only move; then
echo "== NodePort -> LoadBalancer, light host profile (cargo test --test scale_bench bench_move_to_load_balancer -- --ignored)"
cargo test --quiet --features ssr --test scale_bench bench_move_to_load_balancer -- --ignored --nocapture 2>&1 |
  grep -E '^(==|console|bare|wall|created)'
fi

if only move-full; then
echo "== NodePort -> LoadBalancer, full upstream test host (cargo test --test reconciler_bench -- --ignored)"
KUBEBYON_BENCH_CLUSTERS="${KUBEBYON_BENCH_FULL_CLUSTERS:-200}" \
  cargo test --quiet --features ssr --test reconciler_bench -- --ignored --nocapture 2>&1 |
  grep -E '^(==|console|bare|wall|created|host)'
fi
