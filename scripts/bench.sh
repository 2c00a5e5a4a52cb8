#!/usr/bin/env bash
# `make bench`: figures, not pass/fail. Prints the release hydrate bundle size
# (raw and gzip -9), the console's memory after start and after 200 page loads,
# and the reconciler's switch figures on a test host (tests/reconciler_bench.rs:
# N clusters NodePort -> LoadBalancer against a bare kube-rs client; N =
# KUBEBYON_BENCH_CLUSTERS, default and at most 200).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
site=$(bash scripts/build-console.sh)
source scripts/console-env.sh

echo "== hydrate bundle ($site/pkg)"
total_raw=0; total_gz=0
for f in "$site"/pkg/kubebyon.wasm "$site"/pkg/kubebyon.js "$site"/pkg/kubebyon.css; do
  raw=$(stat -c %s "$f"); gz=$(gzip -9 -c "$f" | wc -c)
  printf '%-16s %8d bytes raw %8d bytes gzip\n' "$(basename "$f")" "$raw" "$gz"
  case "$f" in *.css) ;; *) total_raw=$((total_raw + raw)); total_gz=$((total_gz + gz)) ;; esac
done
printf 'wasm + js        %8d bytes raw %8d bytes gzip (%d KiB gzip)\n' "$total_raw" "$total_gz" $((total_gz / 1024))

work=$(mktemp -d)
port=$(bash scripts/free-port.sh)
KUBECONFIG="$work/no-host.kubeconfig" LEPTOS_SITE_ADDR="127.0.0.1:$port" KUBEBYON_DATA_DIR="$work" KUBEBYON_ADMIN_PASSWORD="bench-password-123" \
  "$KUBEBYON_BIN" serve >"$work/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do sleep 0.1; done
echo "== server memory (pid $pid)"
echo "after start:      $(awk '/VmRSS/{print $2, $3}' /proc/$pid/status) RSS"
for _ in $(seq 1 200); do curl -fsS -o /dev/null "http://127.0.0.1:$port/login"; done
echo "after 200 pages:  $(awk '/VmRSS/{print $2, $3}' /proc/$pid/status) RSS"

echo "== reconciler: NodePort -> LoadBalancer switches on a test host"
hostsim_target="${HOSTSIM_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubebyon/target-hostsim}"
CARGO_TARGET_DIR="$hostsim_target" cargo build --quiet --locked --manifest-path hostsim/Cargo.toml --bin hostsim
KUBEBYON_CONTROL_PLANE_DIR="$(bash scripts/build-control-plane.sh | tail -n 1)" HOSTSIM_BIN="$hostsim_target/debug/hostsim" \
  cargo test --quiet --features ssr --test reconciler_bench -- --ignored --nocapture 2>&1 | grep -E '^(==|console|bare|wall|created)'
