#!/usr/bin/env bash
# `make test`: every test, against real parts.
#   1. formatting and lints of both crates (scripts/lint.sh)
#   2. Rust unit and integration tests (SQLite file + a throwaway PostgreSQL server)
#   3. the release build, served on a free port, driven by Playwright in Debian's Chromium
#   4. the host cluster tests (real etcd + kube-apiserver + kube-controller-manager, hostsim)
# Everything it starts is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/install-tools.sh --test

work=$(mktemp -d /tmp/kubebyon-test.XXXXXX)
chmod 755 "$work"
server_pid=""
cleanup() {
  status=$?
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  bash scripts/test-postgres.sh stop "$work/pg" || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
step() { printf '\n==> %s\n' "$*" >&2; }

bash scripts/lint.sh

step "PostgreSQL for the storage tests"
KUBEBYON_TEST_POSTGRES_URL=$(bash scripts/test-postgres.sh start "$work/pg")
export KUBEBYON_TEST_POSTGRES_URL

step "Rust tests"
cargo test --features ssr

step "release build"
bash scripts/build-console.sh >/dev/null
source scripts/console-env.sh

step "console for the browser tests"
port=$(bash scripts/free-port.sh)
# No host cluster for these pages: requests stay queued (docs/testing.md).
export KUBECONFIG="$work/no-host.kubeconfig"
export LEPTOS_SITE_ADDR="127.0.0.1:$port" KUBEBYON_DATA_DIR="$work/data" KUBEBYON_ADMIN_PASSWORD="e2e-admin-password"
"$KUBEBYON_BIN" serve >"$work/console.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/console.log" >&2; exit 1; }
  sleep 0.2
done
if grep -q -i -E "e2e-admin-password|kubebyon_session=" "$work/console.log"; then
  echo "a secret reached the console log" >&2; exit 1
fi

step "Playwright (Debian Chromium)"
KUBEBYON_URL="http://127.0.0.1:$port" KUBEBYON_ADMIN_PASSWORD="e2e-admin-password" \
  npx playwright test --config end2end/playwright.config.ts
if grep -q -i -E "e2e-admin-password|kubebyon_session=|correct horse" "$work/console.log"; then
  echo "a secret reached the console log" >&2; exit 1
fi

step "host cluster (kube-apiserver + etcd + hostsim)"
bash scripts/hostsim-test.sh
