# Shared environment for the project's scripts (sourced, not run).
# One target dir outside the clone so a fresh clone (CI) rebuilds incrementally.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kubebyon/target}"
export TOOLS_DIR="${TOOLS_DIR:-$HOME/.cache/kubebyon/tools}"
# Go fetched by scripts/install-go.sh when the machine has none new enough.
export GO_HOME_DIR="${GO_HOME_DIR:-$HOME/.cache/kubebyon/go}"
export PATH="$TOOLS_DIR/bin:$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
if [ -x "$GO_HOME_DIR/bin/go" ]; then export PATH="$GO_HOME_DIR/bin:$PATH"; fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

# Prints the folder holding PostgreSQL's server binaries (initdb, pg_ctl, postgres).
pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}
