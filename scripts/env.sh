# Shared environment for the project's scripts (sourced, not run).
# One target dir outside the clone so a fresh clone (CI) rebuilds incrementally.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kubebyon/target}"
export TOOLS_DIR="${TOOLS_DIR:-$HOME/.cache/kubebyon/tools}"
export PATH="$TOOLS_DIR/bin:$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

# Prints the folder holding PostgreSQL's server binaries (initdb, pg_ctl, postgres).
pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}
