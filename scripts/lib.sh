# shellcheck shell=bash disable=SC2034  # (variables for the scripts that source it)
# Sourced by every script (never run): where things live, PATH, and the small
# helpers they share. Each script starts with `set -euo pipefail`.

KUBEBYON_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# One cache folder outside the clone, so a fresh clone (CI) rebuilds incrementally.
KUBEBYON_CACHE="${KUBEBYON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubebyon}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$KUBEBYON_CACHE/target}"
# hostsim is a workspace of its own: its own target dir, never the console's build lock.
export HOSTSIM_TARGET_DIR="${HOSTSIM_TARGET_DIR:-$KUBEBYON_CACHE/target-hostsim}"
# Built tools (scripts/install-tools.sh).
export TOOLS_DIR="${TOOLS_DIR:-$KUBEBYON_CACHE/tools}"
# Go fetched by scripts/install-go.sh when the machine has none new enough.
export GO_HOME_DIR="${GO_HOME_DIR:-$KUBEBYON_CACHE/go}"
# The test host's upstream binaries, one folder per pinned release (scripts/build-control-plane.sh).
CONTROL_PLANE_ROOT="$KUBEBYON_CACHE/control-plane"
# The hand-started host's state (scripts/host-up.sh, scripts/host-down.sh).
HOST_DIR="${KUBEBYON_HOST_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebyon/host}"
export PATH="$TOOLS_DIR/bin:$KUBEBYON_ROOT/node_modules/.bin:$HOME/.cargo/bin:$PATH"
if [ -x "$GO_HOME_DIR/bin/go" ]; then export PATH="$GO_HOME_DIR/bin:$PATH"; fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

# clippy_in_builds: from here on, every cargo build of a workspace's own crates
# runs clippy (`-D warnings`) as it compiles them: what `cargo clippy` does, on
# the builds `make test` makes anyway, so dependencies are compiled once for
# the lints and the tests, not once more in check mode (docs/testing.md).
clippy_in_builds() {
  local driver
  driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) ||
    die "clippy-driver not found (rustup component add clippy)"
  export RUSTC_WORKSPACE_WRAPPER="$driver"
  export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}

log() { printf '==> [%s] %s\n' "$(date +%T)" "$*" >&2; }
step() { printf '\n==> [%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf '%s\n' "$*" >&2; exit 1; }

# Prints a TCP port on 127.0.0.1 that is free right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# on_exit 'COMMAND': runs COMMAND (evaluated then, so it sees the variables'
# last values) when the script exits, before the commands registered earlier;
# one failing does not stop the others. One EXIT trap for all: a script
# registers what it starts instead of replacing its trap each time.
_on_exit=()
on_exit() {
  _on_exit+=("$1")
  trap _run_on_exit EXIT
}
_run_on_exit() {
  local i
  for ((i = ${#_on_exit[@]} - 1; i >= 0; i--)); do eval "${_on_exit[i]}" || true; done
}

# wait_healthy PORT [PID LOG] [SECONDS]: until the console on 127.0.0.1:PORT
# answers /healthz; fails when PID has exited (LOG shown) or after SECONDS (60).
wait_healthy() {
  local port=$1 pid=${2:-} log=${3:-} limit=${4:-60} start=$SECONDS
  until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      [ -n "$log" ] && cat "$log" >&2
      die "the console on port $port exited before it answered"
    fi
    if (( SECONDS - start >= limit )); then
      [ -n "$log" ] && tail -n 20 "$log" >&2
      die "the console on port $port did not answer /healthz in $limit s"
    fi
    sleep 0.2
  done
}

# Prints the folder holding PostgreSQL's server binaries (initdb, pg_ctl, postgres).
pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}
