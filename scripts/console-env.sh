# shellcheck shell=bash
# Environment the built console binary needs at run time (sourced; the build
# sets the compile-time ones itself, scripts/build-console.sh).
export LEPTOS_OUTPUT_NAME=kubebyon
export LEPTOS_SITE_ROOT="${LEPTOS_SITE_ROOT:-$PWD/target/site}"
export LEPTOS_SITE_PKG_DIR=pkg
export LEPTOS_SITE_ADDR="${LEPTOS_SITE_ADDR:-127.0.0.1:3000}"
export LEPTOS_ENV=PROD
# The build names the assets kubebyon.<hash>.* (hash-files in Cargo.toml).
export LEPTOS_HASH_FILES=true
# The release build's server unless the caller names another (`make test`
# runs the test build's: scripts/build-console.sh --server-from-tests).
export KUBEBYON_BIN="${KUBEBYON_BIN:-$CARGO_TARGET_DIR/release/kubebyon}"
