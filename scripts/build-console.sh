#!/usr/bin/env bash
# Builds the console (server binary + hydrate bundle + CSS) in release mode
# into the shared target dir, and prints the folder holding the site assets.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo leptos build --release >&2
echo "$PWD/target/site"
