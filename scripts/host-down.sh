#!/usr/bin/env bash
# Stops the host started by scripts/host-up.sh (by its PID). `--purge` also
# deletes its data folder (etcd data, certificates, kubeconfig).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dir=$HOST_DIR
pidfile="$dir/hostsim.pid"

if [[ -f "$pidfile" ]]; then
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "host-down: pid $pid did not stop in 10 s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "host-down: stopped pid $pid" >&2
  fi
  rm -f "$pidfile" "$dir/ready"
else
  echo "host-down: not running" >&2
fi

if [[ "${1:-}" == "--purge" ]]; then
  rm -rf "$dir"
  echo "host-down: removed $dir" >&2
fi
