#!/usr/bin/env bash
# Builds the console in release mode into the shared target dir — the server
# binary, the hydrate bundle, the CSS, content-hashed and precompressed — and
# prints the folder holding the site.
#
# The steps are `cargo leptos build --release`'s (cargo-leptos 0.3.11,
# src/compile/{server,front,style,hash,assets}.rs), run directly: cargo-leptos
# itself took 16–26 minutes to build on a fresh machine (cargo-generate with
# libgit2, swc, lightningcss), more than the console. Its settings stay in
# Cargo.toml's [package.metadata.leptos], which this script follows.
#
# --server-from-tests: the server is the one `cargo test --features ssr`
# built ($CARGO_TARGET_DIR/debug/kubebyon, what `make test`'s browser suite
# runs); only the site is built, its hash.txt written beside that binary.
set -euo pipefail
server_from_tests=false
if [ "${1:-}" = --server-from-tests ]; then server_from_tests=true; fi
cd "$(dirname "$0")/.."
source scripts/lib.sh

site=target/site
pkg=$site/pkg
front_dir="$CARGO_TARGET_DIR/front"
# What cargo-leptos exports to both builds (Project::to_envs); leptos reads
# LEPTOS_OUTPUT_NAME at compile time, the rest at run time (scripts/console-env.sh).
export LEPTOS_OUTPUT_NAME=kubebyon LEPTOS_SITE_ROOT=$site LEPTOS_SITE_PKG_DIR=pkg \
  LEPTOS_SITE_ADDR=127.0.0.1:3000 LEPTOS_RELOAD_PORT=3001 LEPTOS_LIB_DIR=. LEPTOS_BIN_DIR=. \
  LEPTOS_JS_MINIFY=true LEPTOS_HASH_FILES=true LEPTOS_HASH_FILE_NAME=hash.txt

# The two compilations use separate target dirs, so they run side by side
# (each one's serial tail — LTO, linking — fills the other's idle core).
server_profile=release
$server_from_tests && server_profile=debug
log "cargo build: hydrate bundle (wasm32, wasm-release)$($server_from_tests || echo " and server (ssr, release)")"
cargo build --package=kubebyon --lib --target-dir="$front_dir" --target=wasm32-unknown-unknown \
  --no-default-features --features=hydrate --profile=wasm-release >&2 &
front_pid=$!
server_status=0
if ! $server_from_tests; then
  cargo build --package=kubebyon --bin=kubebyon --no-default-features --features=ssr --release >&2 || server_status=$?
fi
front_status=0
wait "$front_pid" || front_status=$?
[ "$server_status" -eq 0 ] && [ "$front_status" -eq 0 ] || exit 1

# The site: public/ mirrored at its root, then pkg/ rebuilt.
mkdir -p "$site"
find "$site" -mindepth 1 -maxdepth 1 ! -name pkg -exec rm -rf {} +
cp -a public/. "$site/"
mkdir -p "$pkg"
find "$pkg" -mindepth 1 -maxdepth 1 ! -name 'kubebyon.*.*' -exec rm -rf {} +

log "wasm-bindgen, wasm-opt, JavaScript minified"
wasm-bindgen --target=web --no-typescript --out-name=kubebyon --out-dir="$pkg" \
  "$front_dir/wasm32-unknown-unknown/wasm-release/kubebyon.wasm"
mv "$pkg/kubebyon_bg.wasm" "$pkg/kubebyon.wasm"
wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int "$pkg/kubebyon.wasm" -o "$pkg/kubebyon.wasm"
esbuild "$pkg/kubebyon.js" --minify --format=esm --log-level=warning --outfile="$pkg/kubebyon.min.js"
mv "$pkg/kubebyon.min.js" "$pkg/kubebyon.js"

log "Tailwind CSS"
tailwindcss --input style/main.css --output "$pkg/kubebyon.css" --minify 2>/dev/null

# kubebyon.<md5>.{js,wasm,css}, hash.txt beside the server binary (where leptos
# looks for it), brotli and gzip copies; older builds' files removed.
node scripts/site-assets.mjs "$pkg" "$CARGO_TARGET_DIR/$server_profile/hash.txt" >&2
echo "$PWD/$site"
