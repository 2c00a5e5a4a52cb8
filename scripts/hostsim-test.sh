#!/usr/bin/env bash
# Runs the host cluster tests: builds kube-apiserver + etcd if they are not cached
# yet (~/.cache/kubebyon/control-plane/<version>/), then the hostsim crate's unit
# and integration tests against real processes. Idempotent; safe to re-run.
# Extra arguments go to `cargo test` (e.g. a test name filter). A first
# argument --without-syncer runs every test target but tests/syncer.rs (and
# builds no syncer parts: `make test` runs them while those build); --syncer
# runs only tests/syncer.rs.
set -euo pipefail
part=()
build=()
case "${1:-}" in
  --without-syncer)
    shift; build=(--without-syncer); part=(--lib --bins)
    for t in "$(dirname "${BASH_SOURCE[0]}")"/../hostsim/tests/*.rs; do
      [ "$(basename "$t")" = syncer.rs ] || part+=(--test "$(basename "$t" .rs)")
    done ;;
  --syncer) shift; part=(--test syncer) ;;
esac

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$KUBEBYON_ROOT
KUBEBYON_CONTROL_PLANE_DIR="$("$root/scripts/build-control-plane.sh" "${build[@]}" | tail -n 1)"
export KUBEBYON_CONTROL_PLANE_DIR
export CARGO_TARGET_DIR="$HOSTSIM_TARGET_DIR"

# kubectl of the pinned release (built beside kube-apiserver).
export PATH="$KUBEBYON_CONTROL_PLANE_DIR:$PATH"
if [[ "$(id -u)" != 0 ]] && [[ "$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null || echo 1024)" -gt 443 ]]; then
  echo "hostsim-test: LoadBalancer addresses listen on port 443: run as root or" \
       "set net.ipv4.ip_unprivileged_port_start=443" >&2
fi

exec cargo test --manifest-path "$root/hostsim/Cargo.toml" --locked "${part[@]}" "$@"
