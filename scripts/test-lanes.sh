#!/usr/bin/env bash
# Runs the console's Rust test binaries (what `cargo test --features ssr`
# runs: the library's unit tests and every tests/*.rs) in two lanes at once.
# Usage: test-lanes.sh [--lanes|--after] LOG_DIR "NAME ..." "NAME::TEST ..." ["NAME=FILE ..."]
#   lane A runs the named test targets in that order, lane B every other one
#   in cargo's order (the library's unit tests are `cdylib:kubebyon`, the
#   binary's `bin:kubebyon`); the tests named in the third argument (a
#   target and a test whose figure is a wall-clock comparison) are skipped
#   in the lanes and run alone once both lanes are done. Each binary's output
#   goes to LOG_DIR/<name>.log and is printed when it fails. Exit status:
#   non-zero when any binary failed. The fourth argument gates tests on
#   files (a part built in the background; FILE.failed instead fails them):
#   `NAME=FILE` starts binary NAME once FILE exists; `NAME::T1,T2=FILE` runs
#   NAME in its lane without tests T1 and T2, and those two (exact names)
#   once the lanes are done and FILE exists.
# --lanes runs only the lanes and --after only what follows them (the gated
# and solo tests), so the caller can do other work in between (both calls
# take the same arguments).
# The binaries run from the crate's root with the variables cargo sets for a
# test (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, …).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
mode=both
case "${1:-}" in --lanes) mode=lanes; shift ;; --after) mode=after; shift ;; esac
logs=$1
read -r -a lane_a <<<"$2"
read -r -a solo <<<"${3:-}"
read -r -a gates <<<"${4:-}"
mkdir -p "$logs"

# name<TAB>executable of every test binary, built already (no compile), read
# from cargo by --lanes and kept in LOG_DIR/binaries.tsv for --after: by then
# another build may have run in the same target dir (hostsim's).
if [ "$mode" = after ] && [ -s "$logs/binaries.tsv" ]; then
  mapfile -t built <"$logs/binaries.tsv"
else
  mapfile -t built < <(cargo test --features ssr --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
           | "\(if .target.kind[0] == "test" then .target.name else "\(.target.kind[0]):\(.target.name)" end)\t\(.executable)"')
  printf '%s\n' "${built[@]}" >"$logs/binaries.tsv"
fi
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
for n in "${lane_a[@]}" "${solo[@]%%::*}"; do [ -n "${exe[$n]:-}" ] || die "test-lanes: no test target $n"; done

export CARGO_MANIFEST_DIR="$KUBEBYON_ROOT" CARGO_PKG_NAME=kubebyon CARGO_CRATE_NAME=kubebyon
export CARGO_PKG_VERSION
CARGO_PKG_VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# The tests of binary NAME that wait for a gate after the lanes (one per line).
gated_tests() {
  local g key
  for g in "${gates[@]}"; do
    key=${g%%=*}
    [[ "$key" == "$1::"* ]] && tr ',' '\n' <<<"${key#*::}"
  done
  return 0
}

# The arguments of binary NAME in a lane: --skip for each of its solo and gated tests.
lane_args() {
  local t
  for t in "${solo[@]}"; do
    [ "${t%%::*}" = "$1" ] && printf '%s\n' --skip "${t#*::}"
  done
  gated_tests "$1" | while read -r t; do printf '%s\n' --skip "$t"; done
  return 0
}

# wait_gate NAME: until NAME's gate file exists (non-zero: its build failed).
# NAME is a binary (its whole-binary gate) or NAME::TESTS (a gated subset).
wait_gate() {
  local g file since=$SECONDS
  for g in "${gates[@]}"; do
    [ "${g%%=*}" = "$1" ] || continue
    file=${g#*=}
    until [ -e "$file" ]; do
      [ -e "$file.failed" ] && { log "test $1: what it needs did not build ($file.failed)"; return 1; }
      sleep 1
    done
    [ $((SECONDS - since)) -gt 1 ] && log "test $1: waited $((SECONDS - since)) s for $file"
  done
  return 0
}

# run NAME LOG [ARGS...]: one binary; its result logged, its output shown when it fails.
run() {
  local n=$1 out=$2 start status=0 what
  shift 2
  what="test ${n}${*:+ $*}"
  wait_gate "${gate:-$n}" || return 1
  start=$SECONDS
  "${exe[$n]}" "$@" >"$out" 2>&1 || status=$?
  if [ "$status" -eq 0 ]; then
    log "$what: ok in $((SECONDS - start)) s ($(grep -E '^test result:' "$out" | tail -n 1))"
  else
    log "$what: FAILED (exit $status) in $((SECONDS - start)) s"
    cat "$out" >&2
  fi
  return "$status"
}

# run_lane NAME...: each binary in turn; a failed one is shown and the lane
# goes on (as cargo test --no-fail-fast would), its status remembered.
run_lane() {
  local failed=0 n args
  for n in "$@"; do
    mapfile -t args < <(lane_args "$n")
    run "$n" "$logs/$n.log" "${args[@]}" || failed=1
  done
  return "$failed"
}
status=0
if [ "$mode" != after ]; then
  run_lane "${lane_a[@]}" &
  a=$!
  run_lane "${lane_b[@]}" || status=1
  wait "$a" || status=1
fi
[ "$mode" = lanes ] && gates=() solo=()
# The gated subsets, once their parts are built.
for g in "${gates[@]}"; do
  key=${g%%=*}
  [[ "$key" == *::* ]] || continue
  n=${key%%::*}
  mapfile -t tests < <(gated_tests "$n")
  gate="$key" run "$n" "$logs/$n-gated.log" --exact "${tests[@]}" || status=1
done
for t in "${solo[@]}"; do
  run "${t%%::*}" "$logs/${t#*::}.log" --exact "${t#*::}" || status=1
done
if [ "$status" -ne 0 ]; then
  die "test-lanes: a test binary failed (above)"
fi
