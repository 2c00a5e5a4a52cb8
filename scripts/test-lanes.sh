#!/usr/bin/env bash
# Runs the console's Rust test binaries (what `cargo test --features ssr`
# runs: the library's unit tests and every tests/*.rs) in two lanes at once.
# Usage: test-lanes.sh LOG_DIR "NAME ..." [-- ARGS for every binary]
#   lane A runs the named test targets in that order, lane B every other one
#   in cargo's order (the library's unit tests are `cdylib:kubebyon`, the
#   binary's `bin:kubebyon`); each binary's output goes to LOG_DIR/<name>.log and is
#   printed when it fails. Exit status: non-zero when any binary failed.
# The binaries run from the crate's root with the variables cargo sets for a
# test (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, …).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
logs=$1
read -r -a lane_a <<<"$2"
shift 2
[ "${1:-}" = "--" ] && shift
mkdir -p "$logs"

# name<TAB>executable of every test binary, built already (fresh: no compile).
mapfile -t built < <(cargo test --features ssr --no-run --message-format=json 2>/dev/null |
  jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
         | "\(if .target.kind[0] == "test" then .target.name else "\(.target.kind[0]):\(.target.name)" end)\t\(.executable)"')
[ "${#built[@]}" -gt 0 ] || die "test-lanes: cargo listed no test binaries"
declare -A exe=()
order=()
for line in "${built[@]}"; do
  exe[${line%%$'\t'*}]=${line#*$'\t'}
  order+=("${line%%$'\t'*}")
done
lane_b=()
for n in "${order[@]}"; do
  [[ " ${lane_a[*]} " == *" $n "* ]] || lane_b+=("$n")
done
for n in "${lane_a[@]}"; do [ -n "${exe[$n]:-}" ] || die "test-lanes: no test target $n"; done

export CARGO_MANIFEST_DIR="$KUBEBYON_ROOT" CARGO_PKG_NAME=kubebyon CARGO_CRATE_NAME=kubebyon
export CARGO_PKG_VERSION
CARGO_PKG_VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# run_lane NAME...: each binary in turn; a failed one is shown and the lane
# goes on (as cargo test --no-fail-fast would), its status remembered.
run_lane() {
  local failed=0 n start status
  for n in "$@"; do
    start=$SECONDS
    status=0
    "${exe[$n]}" "${TEST_ARGS[@]}" >"$logs/$n.log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
      log "test $n: ok in $((SECONDS - start)) s ($(grep -E '^test result:' "$logs/$n.log" | tail -n 1))"
    else
      failed=1
      log "test $n: FAILED (exit $status) in $((SECONDS - start)) s"
      cat "$logs/$n.log" >&2
    fi
  done
  return "$failed"
}
TEST_ARGS=("$@")
run_lane "${lane_a[@]}" &
a=$!
status_b=0
run_lane "${lane_b[@]}" || status_b=$?
status_a=0
wait "$a" || status_a=$?
if [ "$status_a" -ne 0 ] || [ "$status_b" -ne 0 ]; then
  die "test-lanes: a test binary failed (above)"
fi
