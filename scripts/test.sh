#!/usr/bin/env bash
# `make test`: every test, against real parts.
#   1. formatting and shellcheck (scripts/lint.sh; on a machine without
#      leptosfmt yet, its check runs last, after its build in idle minutes);
#      clippy (`-D warnings`) runs inside every build below (lib.sh's
#      clippy_in_builds): the console's test build (all targets), its wasm
#      build, hostsim's builds
#   2. Rust unit and integration tests (SQLite file + a throwaway PostgreSQL server)
#   3. the site (release wasm, CSS, hashed and precompressed; built beside the
#      Rust tests) with the server the tests built, served twice on free ports —
#      once without a host cluster, once connected to a simulated k3s host (real
#      kube-apiserver + etcd, hostsim) — driven by Playwright in Debian's Chromium
#   4. the host cluster tests (real etcd + kube-apiserver + kube-controller-manager, hostsim)
#   Where a fresh machine still builds vCluster's syncer after the lanes, the
#   parts that do not need it run first: the browser specs without the live
#   host and, beside them, hostsim's other tests; then the reconciler's syncer
#   tests, the live host's specs and hostsim's syncer tests.
# Everything it starts is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

work=$(mktemp -d /tmp/kubebyon-test.XXXXXX)
chmod 755 "$work"
server_pid=""
host_console_pid=""
oidc_pid=""
control_plane_pid=""
site_pid=""
leptosfmt_pid=""
hostsim_pid=""
cleanup() {
  status=$?
  # the background builds (each its own process group: go and its compilers, cargo and rustc)
  for group in $control_plane_pid $site_pid $leptosfmt_pid $hostsim_pid; do kill -- "-$group" 2>/dev/null || true; done
  for pid in $server_pid $host_console_pid $oidc_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  KUBEBYON_HOST_DIR="$work/host" bash scripts/host-down.sh 2>/dev/null || true
  bash scripts/test-postgres.sh stop "$work/pg" || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

# The host cluster's Go parts (built once from hostcluster/) build in the
# background at nice 10 (its autogroup's too: scripts/niced.sh), in what the
# Rust test build leaves idle (a fresh machine's ~12 Go minutes alone); the
# lanes need them. vCluster's syncer, kine and the chart's distro Kubernetes
# (v1.34.0) build after the rest, beside the Rust test build and the lanes;
# only the reconciler tests whose clusters run upstream's syncer
# (SYNCER_TESTS) wait for them (syncer.ready) when they are not built before
# the lanes. wasm-bindgen-cli, which only the site needs, is built at the
# start of the site's job, and leptosfmt (below) last.
bash scripts/install-go.sh
# shellcheck disable=SC2016 # (expanded by the inner shell)
setsid bash scripts/niced.sh 10 bash -c 'bash scripts/build-control-plane.sh --without-syncer >"$1/control-plane.out" &&
  touch "$1/control-plane.ready" && { bash scripts/build-control-plane.sh >/dev/null && touch "$1/syncer.ready" ||
  { touch "$1/syncer.ready.failed"; exit 1; }; }' _ "$work" \
  2>"$work/control-plane.log" &
control_plane_pid=$!
# leptosfmt (the `view!` macros' formatter, built from crates.io) is only the
# formatting check's: where it is not built yet (a fresh machine), it builds
# at nice 19 from the lanes on, in minutes the tests leave idle, and the
# check runs last; elsewhere it runs now.
leptosfmt_later=()
"$TOOLS_DIR/bin/leptosfmt" --version >/dev/null 2>&1 || leptosfmt_later=(--without-leptosfmt)
bash scripts/install-tools.sh --test --without-wasm-bindgen "${leptosfmt_later[@]}"
bash scripts/lint.sh --without-clippy "${leptosfmt_later[@]}"
clippy_in_builds

step "PostgreSQL for the storage tests"
KUBEBYON_TEST_POSTGRES_URL=$(bash scripts/test-postgres.sh start "$work/pg")
export KUBEBYON_TEST_POSTGRES_URL
export KUBEBYON_REQUIRE_POSTGRES=1

# Test threads get 8 MiB of stack (2 MiB by default): a debug build's
# futures are many times their release size, and the reconciler suite's
# deepest request chains overflowed 2 MiB once (2026-12-05).
export RUST_MIN_STACK=8388608

step "Rust test build (all targets, with clippy)"
# Built while the Go parts may still build (a fresh machine's vCluster syncer
# outlasts the tools). --all-targets: clippy sees the benches too, as
# `cargo clippy --all-targets` does.
cargo test --features ssr --all-targets --no-run

step "host cluster parts and kubectl (built once from hostcluster/**/go.mod)"
until [ -e "$work/control-plane.ready" ]; do
  if ! kill -0 "$control_plane_pid" 2>/dev/null; then
    status=0; wait "$control_plane_pid" || status=$?
    control_plane_pid=""
    [ -e "$work/control-plane.ready" ] && [ "$status" -eq 0 ] && break
    cat "$work/control-plane.log" >&2
    die "the host cluster's parts did not build"
  fi
  sleep 1
done
KUBEBYON_CONTROL_PLANE_DIR=$(tail -n 1 "$work/control-plane.out")
export KUBEBYON_CONTROL_PLANE_DIR
# The tests' kubectl is the pinned release's, not whatever the machine has.
export PATH="$KUBEBYON_CONTROL_PLANE_DIR:$PATH"
# The console's Helm chart with the pinned helm (seconds; its golden renders
# then pass the test host's API server in the reconciler suite).
bash scripts/chart-test.sh
# The tests mostly wait on their host: the site's build (release wasm with
# clippy, CSS, hashes) takes the idle CPU, niced, in its own process group
# (stopped on exit). The browser suite runs the server the test build made
# (the release server is `make run`'s, `make bench`'s and the image's).
# It runs at nice 5, ahead of the syncer's Go build (nice 10): the browser
# specs wait for the site right after the lanes, the syncer is waited for
# later. hostsim's own test build (the host cluster tests and the live host)
# follows in the same slot (site.ready between them: the first browser specs
# need only the site), in the console's target dir here: two thirds of its
# dependencies are the console's, built already (a developer's `make
# test-host` keeps its own dir, out of the console's build lock).
export HOSTSIM_TARGET_DIR="$CARGO_TARGET_DIR"
# shellcheck disable=SC2016 # (expanded by the inner shell)
setsid bash scripts/niced.sh 5 bash -c 'bash scripts/install-tools.sh --wasm-bindgen &&
  bash scripts/build-console.sh --server-from-tests && touch "$1/site.ready" &&
  cargo test --manifest-path hostsim/Cargo.toml --locked --no-run && touch "$1/hostsim.built"' _ "$work" \
  >"$work/site.out" 2>"$work/site.log" &
site_pid=$!
if [ ${#leptosfmt_later[@]} -gt 0 ]; then
  setsid bash scripts/niced.sh 19 bash scripts/install-tools.sh --leptosfmt >"$work/leptosfmt.log" 2>&1 &
  leptosfmt_pid=$!
fi
step "Rust tests in two lanes, the site's build beside them"
# The test binaries `cargo test` would run one after another, run directly
# in two lanes: the longest host suite (reconciler) and the suites that fit
# beside it in one, the rest in the other. They mostly wait on their test
# hosts (each on its own 127.A.B.0/24), so two at once nearly halve the
# wall time on 2 cores (docs/testing.md, "A fresh machine's budget"); the
# one test whose assertion compares wall-clock times runs alone after them
# (beside the other lane it read 7.3 s against 14.0 s, 2026-12-07). The
# crate has no doctests (cargo test's rustdoc pass found none).
# The reconciler tests whose clusters run upstream's syncer (the releases
# tests/reconciler.rs's host() names; keep the two lists together).
SYNCER_TESTS=load_balancer_cluster_with_an_ip_host_is_ready_and_its_kubeconfig_works,per_user_kubeconfigs_follow_membership
SYNCER_TESTS+=,node_port_cluster_and_mode_switches_converge,load_balancer_cluster_with_a_dns_host_probes_ok_through_the_resolver
SYNCER_TESTS+=,deleting_a_cluster_uninstalls_it_and_frees_the_name
# On a fresh machine they wait for the syncer's build (and run after the
# lanes, the browser tests without the live host and hostsim's other tests:
# the idle slot the build left); on a warm one it is built already and they
# run in lane A.
# Without them lane A is ~3 minutes shorter and takes hardening (84 s) from
# lane B, the longer one then (a fresh machine's lanes: 16.0 min on 2026-12-07).
lane_a="reconciler placement"
[ -e "$work/syncer.ready" ] || lane_a+=" hardening"
lanes=("$work/lanes" "$lane_a" "reconciler::endpoints_that_never_answer_do_not_delay_another_clusters_ready")
[ -e "$work/syncer.ready" ] || lanes+=("reconciler::$SYNCER_TESTS=$work/syncer.ready")
bash scripts/test-lanes.sh --lanes "${lanes[@]}"
# Each test binary is ~330 MB (line tables) and every source change makes
# new ones: keep only those of this build (the lanes' list; the library's
# unit tests, the binary's and the binary itself are all `kubebyon-<hash>`)
# and hostsim's newest, so the shared target dir does not fill the disk over
# many runs. (Keeping only the newest `kubebyon-*` deleted two of this build's
# three, and the next cargo call compiled them again: 90 s, 2026-12-07.)
keep="$work/keep"
cut -f2 "$work/lanes/binaries.tsv" >"$keep"
find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 -type f -samefile "$CARGO_TARGET_DIR/debug/kubebyon" >>"$keep"
for t in tests/*.rs lib; do
  n=$(basename "$t" .rs); [ "$n" = lib ] && n=kubebyon
  find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 -type f -name "$n-*" ! -name '*.d' | { grep -vxFf "$keep" || true; } | xargs -r rm -f
done
for t in hostsim/tests/*.rs; do
  find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 -type f -name "$(basename "$t" .rs)-*" ! -name '*.d' -printf '%T@ %p\n' |
    sort -rn | tail -n +2 | cut -d' ' -f2- | xargs -r rm -f
done

step "the site's build"
# (site.ready, or the build's process ended: failed unless site.ready came.)
until [ -e "$work/site.ready" ]; do
  if ! kill -0 "$site_pid" 2>/dev/null; then
    [ -e "$work/site.ready" ] && break
    cat "$work/site.log" >&2
    die "the site did not build"
  fi
  sleep 1
done
KUBEBYON_BIN="$CARGO_TARGET_DIR/debug/kubebyon"
source scripts/console-env.sh

step "an OpenID provider for the browser tests (oidc-provider from npm, on loopback)"
port=$(free_port)
oidc_port=$(free_port)
OIDC_CLIENT_SECRET=e2e-oidc-secret node end2end/oidc/provider.mjs "$oidc_port" "http://127.0.0.1:$port/auth/oidc/callback" \
  >"$work/oidc.log" 2>&1 &
oidc_pid=$!
for _ in $(seq 100); do grep -q '^ready$' "$work/oidc.log" && break; sleep 0.1; done
grep -q '^ready$' "$work/oidc.log" || { cat "$work/oidc.log" >&2; die "the test OpenID provider did not start"; }

step "console for the browser tests"
# It trusts the test provider (end2end/tests/oidc.spec.ts); password sign-in stays on.
export KUBEBYON_PUBLIC_URL="http://127.0.0.1:$port" KUBEBYON_OIDC_ISSUER="http://127.0.0.1:$oidc_port" \
  KUBEBYON_OIDC_CLIENT_ID=kubebyon KUBEBYON_OIDC_CLIENT_SECRET=e2e-oidc-secret \
  KUBEBYON_OIDC_SCOPES=profile,email,groups KUBEBYON_OIDC_ADMIN_GROUP=platform-admins \
  KUBEBYON_OIDC_TEAM_PREFIX=kubebyon-team:
# No host cluster for these pages: requests stay queued (docs/testing.md).
export KUBECONFIG="$work/no-host.kubeconfig"
export LEPTOS_SITE_ADDR="127.0.0.1:$port" KUBEBYON_DATA_DIR="$work/data" KUBEBYON_ADMIN_PASSWORD="e2e-admin-password"
# The browser suite signs in as one admin for most of its writes: the per-user
# spec write limit (tests/http_api.rs checks it) would only slow it down.
export KUBEBYON_SPEC_WRITE_LIMIT=off
"$KUBEBYON_BIN" serve >"$work/console.log" 2>&1 &
server_pid=$!
wait_healthy "$port" "$server_pid" "$work/console.log"

step "assets as a web server should serve them"
# The page names content-hashed files; each is sent precompressed and immutable.
assets=$(curl -fsS "http://127.0.0.1:$port/login" | grep -oE '/pkg/kubebyon\.[A-Za-z0-9_-]+\.(js|wasm|css)' | sort -u)
[ "$(wc -l <<<"$assets")" -eq 3 ] || { echo "the page does not name hashed js, wasm and css" >&2; exit 1; }
for asset in $assets; do
  headers=$(curl -fsS -o /dev/null -D - -H 'accept-encoding: br, gzip' "http://127.0.0.1:$port$asset")
  grep -qi '^content-encoding: br' <<<"$headers" || { echo "$asset: not brotli" >&2; echo "$headers" >&2; exit 1; }
  grep -qi '^cache-control: public, max-age=31536000, immutable' <<<"$headers" || { echo "$asset: not immutable" >&2; exit 1; }
  echo "  $asset: br, immutable" >&2
done
# The hydrate bundle (wasm + JS, gzip -9, as `make bench` measures it) stays
# under 350 KB: a gate, not only a figure.
bundle=0
while read -r asset; do
  bundle=$((bundle + $(gzip -9 -c "$LEPTOS_SITE_ROOT$asset" | wc -c)))
done < <(grep -E '\.(js|wasm)$' <<<"$assets")
echo "  hydrate bundle (wasm + JS, gzip -9): $bundle bytes (at most 350,000)" >&2
[ "$bundle" -le 350000 ] || die "the hydrate bundle is $bundle bytes gzip -9, over 350,000"
if grep -q -i -E "e2e-admin-password|kubebyon_session=" "$work/console.log"; then
  echo "a secret reached the console log" >&2; exit 1
fi

step "Playwright without the live host (Debian Chromium)"
playwright() {
  KUBEBYON_URL="http://127.0.0.1:$port" KUBEBYON_ADMIN_PASSWORD="e2e-admin-password" \
    KUBEBYON_HOST_CONSOLE_URL="http://127.0.0.1:${host_port:-}" KUBEBYON_HOST_NET="${host_net:-}" \
    KUBEBYON_HOSTSIM_BIN="$HOSTSIM_TARGET_DIR/debug/hostsim" KUBEBYON_HOST_KUBECONFIG="${host_kubeconfig:-}" \
    KUBEBYON_OIDC_URL="http://127.0.0.1:$oidc_port" \
    npx playwright test --config end2end/playwright.config.ts "$@"
}
# The specs that meet the host cluster (they read KUBEBYON_HOST_*: live, moves)
# run below, once the syncer is built; the others now.
mapfile -t host_specs < <(grep -l 'KUBEBYON_HOST' end2end/tests/*.spec.ts | xargs -n1 basename)
mapfile -t other_specs < <(grep -L 'KUBEBYON_HOST' end2end/tests/*.spec.ts | xargs -n1 basename)
if [ "${#host_specs[@]}" -eq 0 ] || [ "${#other_specs[@]}" -eq 0 ]; then die "no browser specs found"; fi
# Beside them (both mostly wait: on pages, on test hosts), once hostsim's
# test build (the site's slot) is done: the host cluster tests without the
# syncer, in a process group of their own (stopped on exit), output to a file.
# shellcheck disable=SC2016 # (expanded by the inner shell)
setsid bash -c 'until [ -e "$1/hostsim.built" ]; do
    kill -0 "$2" 2>/dev/null || [ -e "$1/hostsim.built" ] || { echo "hostsim'"'"'s tests did not build" >&2; exit 1; }
    sleep 1
  done
  exec bash scripts/hostsim-test.sh --without-syncer' _ "$work" "$site_pid" >"$work/hostsim.log" 2>&1 &
hostsim_pid=$!
playwright "${other_specs[@]}"

step "the host cluster tests without the syncer (kube-apiserver + etcd + hostsim), run beside those"
status=0; wait "$hostsim_pid" || status=$?
hostsim_pid=""
if [ "$status" -ne 0 ]; then
  cat "$work/hostsim.log" >&2
  [ -e "$work/hostsim.built" ] || cat "$work/site.log" >&2
  die "the host cluster tests without the syncer failed (above)"
fi
grep -E '^(test result:|     Running )' "$work/hostsim.log" >&2 || true
site_pid=""

step "the reconciler's tests on upstream's syncer, then the timing test alone"
bash scripts/test-lanes.sh --after "${lanes[@]}"

step "a simulated host cluster and a console connected to it (live pages)"
# --test-net: a 127.A.B.0/24 of its own, claimed by hostsim with the Rust test
# hosts' lock (hostsim::testhost::Net) and held while it runs, so nothing shares
# an address or port 443. Only the clusters whose tests read inside the
# virtual cluster — the join page's (`e2e-join*`: own nodes, the stand-in's
# API server and controller-manager) and those whose own kubeconfig is
# downloaded (`e2e-live*`, `e2e-nojs*`: upstream's vCluster syncer, whose
# controller-manager signs per-user certificates) — get a control plane of
# their own; the others relay (no process per cluster).
host_kubeconfig=$(KUBEBYON_HOST_DIR="$work/host" KUBEBYON_HOST_API_PORT=$(free_port) \
  bash scripts/host-up.sh --test-latency --test-net --node-cpu 32 --node-memory 128Gi --node-ephemeral-storage 2Ti \
    --vcluster-api syncer --vcluster-api-cap 4 --vcluster-api-releases 'e2e-join*,e2e-live*,e2e-nojs*' | tail -n 1)
host_net=$(cat "$work/host/net")
host_port=$(free_port)
# This one logs as production does (JSON on standard error), checked below.
# The simulated host serves on 127.0.0.0/8: the probe may reach loopback.
# (No OpenID provider for this one: its public URL is its own.)
unset KUBEBYON_PUBLIC_URL KUBEBYON_OIDC_ISSUER KUBEBYON_OIDC_CLIENT_ID KUBEBYON_OIDC_CLIENT_SECRET KUBEBYON_OIDC_SCOPES KUBEBYON_OIDC_ADMIN_GROUP KUBEBYON_OIDC_TEAM_PREFIX
KUBECONFIG="$host_kubeconfig" LEPTOS_SITE_ADDR="127.0.0.1:$host_port" KUBEBYON_DATA_DIR="$work/data-host" KUBEBYON_PROBE_LOOPBACK=1 \
  KUBEBYON_LOG_FORMAT=json "$KUBEBYON_BIN" serve >"$work/console-host.out" 2>"$work/console-host.log" &
host_console_pid=$!
wait_healthy "$host_port" "$host_console_pid" "$work/console-host.log"

step "Playwright with the live host (Debian Chromium)"
playwright "${host_specs[@]}"
# Every log line of the JSON console is one JSON object; requests carry their
# id and, on a cluster's routes, the cluster's (the request span's fields, under "span").
# (jq fails on a line that is not JSON.)
read -r lines ids clusters < <(jq -rs 'map(.span // {}) | [length, (map(select(.request_id)) | length),
  (map(select(.request_id and has("cluster"))) | length)] | @tsv' "$work/console-host.log") || true
echo "  JSON logs: $lines lines, $ids with a request id, $clusters of them with a cluster id" >&2
if ! (( lines > 0 && ids > 0 && clusters > 0 )); then
  # What is not JSON (a panic's message, say), to read before the folder goes.
  grep -v '^{' "$work/console-host.log" | head -n 40 >&2 || true
  die "the JSON log lacks request or cluster ids"
fi
for log in "$work/console.log" "$work/console-host.log" "$work/console-host.out"; do
  if grep -q -i -E "e2e-admin-password|e2e-oidc-secret|kubebyon_oidc_state=|kubebyon_session=|correct horse|BEGIN [A-Z ]*PRIVATE KEY|client-key-data|token=[a-z0-9]{6}\.[a-z0-9]{16}|token='[a-z0-9]{6}\." "$log"; then
    echo "a secret reached the console log ($log)" >&2; exit 1
  fi
done

step "SIGTERM stops the console gracefully (what Kubernetes sends a Pod it stops)"
kill -TERM "$server_pid"
status=0; wait "$server_pid" || status=$?
server_pid=""
[ "$status" -eq 0 ] || { echo "the console exited with $status on SIGTERM" >&2; tail -n 5 "$work/console.log" >&2; exit 1; }
grep -q "shutting down" "$work/console.log" || { echo "no shutdown line in the console log" >&2; exit 1; }
echo "  exit status 0 after finishing its requests" >&2

step "host cluster tests on upstream's syncer"
if [ -n "$control_plane_pid" ] && ! wait "$control_plane_pid"; then
  control_plane_pid=""
  cat "$work/control-plane.log" >&2
  die "vCluster's syncer or kine did not build"
fi
control_plane_pid=""
bash scripts/hostsim-test.sh --syncer

if [ -n "$leptosfmt_pid" ]; then
  status=0; wait "$leptosfmt_pid" || status=$?
  leptosfmt_pid=""
  [ "$status" -eq 0 ] || { cat "$work/leptosfmt.log" >&2; die "leptosfmt did not build"; }
  bash scripts/lint.sh --only-leptosfmt
fi
