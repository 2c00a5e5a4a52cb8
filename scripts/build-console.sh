#!/usr/bin/env bash
# Builds the console (server binary + hydrate bundle + CSS, content-hashed and
# precompressed) in release mode into the shared target dir, and prints the
# folder holding the site assets.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo leptos build --release >&2
# brotli + gzip copies of kubebyon.<hash>.{js,wasm,css} (older builds' removed)
node scripts/precompress.mjs target/site/pkg "$CARGO_TARGET_DIR/release/hash.txt" >&2
echo "$PWD/target/site"
