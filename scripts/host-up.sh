#!/usr/bin/env bash
# Starts the test k3s host in the background: etcd, kube-apiserver (port
# ${KUBEBYON_HOST_API_PORT:-6443}), kube-controller-manager, kube-scheduler,
# helm-controller and MetalLB (upstream's own) and hostsim's node, state in
# ${KUBEBYON_HOST_DIR:-~/.local/share/kubebyon/host}. Prints the admin kubeconfig
# path as the last line of stdout. Already running: just prints it again.
# Stop with scripts/host-down.sh.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$KUBEBYON_ROOT
dir=$HOST_DIR
port="${KUBEBYON_HOST_API_PORT:-6443}"
pidfile="$dir/hostsim.pid"
mkdir -p "$dir/logs"

if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && [[ -f "$dir/ready" ]]; then
  echo "host-up: already running (pid $(cat "$pidfile"))" >&2
  cat "$dir/ready"
  exit 0
fi

# vCluster's syncer, kine and the distro's Kubernetes unless `--vcluster-api
# real` or `relay` (syncer is hostsim's default; make test builds them in the
# background meanwhile: never two builds of one binary).
parts=""
prev=""
for arg in "$@"; do
  if [[ "$prev" == --vcluster-api && "$arg" != syncer ]] ||
    [[ "$arg" == --vcluster-api=* && "$arg" != --vcluster-api=syncer ]]; then parts=--without-syncer; fi
  prev=$arg
done
KUBEBYON_CONTROL_PLANE_DIR="$("$root/scripts/build-control-plane.sh" $parts | tail -n 1)"
export KUBEBYON_CONTROL_PLANE_DIR
export CARGO_TARGET_DIR="$HOSTSIM_TARGET_DIR"
cargo build --quiet --locked --manifest-path "$root/hostsim/Cargo.toml" --bin hostsim >&2

rm -f "$dir/ready"
# setsid: the host outlives this shell; hostsim stops etcd and kube-apiserver
# itself on SIGTERM (and the kernel kills them if hostsim dies).
setsid "$CARGO_TARGET_DIR/debug/hostsim" up --data-dir "$dir" --api-port "$port" "$@" \
  </dev/null >>"$dir/logs/hostsim.log" 2>&1 &
pid=$!
echo "$pid" >"$pidfile"

start=$SECONDS
until [[ -f "$dir/ready" ]]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "host-up: hostsim exited; last log lines:" >&2
    tail -n 20 "$dir/logs/hostsim.log" >&2
    rm -f "$pidfile"
    exit 1
  fi
  if (( SECONDS - start > 90 )); then
    echo "host-up: not ready after 90 s (log: $dir/logs/hostsim.log)" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
  fi
  sleep 0.2
done
echo "host-up: simulated host ready in $((SECONDS - start)) s (pid $pid, API https://127.0.0.1:$port, logs $dir/logs)" >&2
cat "$dir/ready"
