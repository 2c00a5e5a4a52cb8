#!/usr/bin/env bash
# `make lint`: formatting and lints of every crate (the console and hostsim).
#   --without-clippy    formatting and shellcheck only (`make test` runs clippy
#                       inside its builds instead: lib.sh's clippy_in_builds)
#   --without-leptosfmt not the `view!` macros' formatting
#   --only-leptosfmt    only the `view!` macros' formatting (`make test` builds
#                       leptosfmt last, in its idle minutes, and checks then)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
with_clippy=true with_leptosfmt=true
for arg in "$@"; do
  case $arg in
    --without-clippy) with_clippy=false ;;
    --without-leptosfmt) with_leptosfmt=false ;;
    --only-leptosfmt)
      step "leptosfmt (view! macros)"
      leptosfmt --check src >/dev/null || die "run: make fmt"
      exit 0 ;;
    *) die "lint.sh: unknown argument $arg" ;;
  esac
done

step "rustfmt"
cargo fmt --check
cargo fmt --check --manifest-path hostsim/Cargo.toml
if $with_leptosfmt; then
  step "leptosfmt (view! macros)"
  leptosfmt --check src >/dev/null || die "run: make fmt"
fi

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
