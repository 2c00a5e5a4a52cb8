#!/usr/bin/env bash
# `make lint`: formatting and lints of every crate (the console and hostsim).
# --without-clippy: formatting and shellcheck only (`make test` runs clippy
# inside its builds instead: lib.sh's clippy_in_builds).
set -euo pipefail
with_clippy=true
if [ "${1:-}" = --without-clippy ]; then with_clippy=false; fi
cd "$(dirname "$0")/.."
source scripts/lib.sh

step "rustfmt and leptosfmt (view! macros)"
cargo fmt --check
leptosfmt --check src >/dev/null || { echo "run: make fmt" >&2; exit 1; }
cargo fmt --check --manifest-path hostsim/Cargo.toml

if $with_clippy; then
  step "clippy (server and browser builds)"
  cargo clippy --quiet --features ssr --all-targets -- -D warnings
  cargo clippy --quiet --lib --features hydrate --target wasm32-unknown-unknown -- -D warnings

  step "clippy (hostsim)"
  CARGO_TARGET_DIR="$HOSTSIM_TARGET_DIR" \
    cargo clippy --quiet --locked --manifest-path hostsim/Cargo.toml --all-targets -- -D warnings
fi

step "shellcheck (scripts)"
shellcheck -x -P scripts scripts/*.sh .ci/run docs/experiments/*.sh
