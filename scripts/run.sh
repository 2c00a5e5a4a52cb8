#!/usr/bin/env bash
# `make run`: installs what is missing, starts the simulated host cluster when
# no KUBECONFIG is given, builds the console and runs it in the foreground on
# http://127.0.0.1:3000 with an embedded SQLite database in ./data.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
bash scripts/install-tools.sh

if [ -z "${KUBECONFIG:-}" ]; then
  echo "==> no KUBECONFIG given: starting the simulated host cluster (scripts/host-up.sh)" >&2
  KUBECONFIG=$(bash scripts/host-up.sh | tail -n 1)
  export KUBECONFIG KUBEBYON_SIMULATED_HOST=1
fi

bash scripts/build-console.sh >/dev/null
source scripts/console-env.sh
export KUBEBYON_DATA_DIR="${KUBEBYON_DATA_DIR:-$PWD/data}"
exec "$KUBEBYON_BIN" serve
