#!/usr/bin/env bash
# Installs, idempotently and from registries only, every tool the run and test
# commands need: the wasm target, wasm-bindgen-cli (built from crates.io with the
# workaround in docs/upstream-problems.md), Go when missing
# (scripts/install-go.sh), npm packages from the committed lock file, and (with --test)
# Debian's Chromium, CJK fonts and PostgreSQL.
#   --test                 also what `make test` needs (Debian packages, leptosfmt)
#   --without-leptosfmt    not leptosfmt, --without-wasm-bindgen not wasm-bindgen-cli
#                          (`make test` builds each where it is first needed, in
#                          the background: scripts/test.sh)
#   --leptosfmt, --wasm-bindgen  only that tool
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

test=false leptosfmt=true wasm_bindgen=true only=""
for arg in "$@"; do
  case $arg in
    --test) test=true ;;
    --without-leptosfmt) leptosfmt=false ;;
    --without-wasm-bindgen) wasm_bindgen=false ;;
    --leptosfmt | --wasm-bindgen) only=${arg#--} ;;
    *) die "install-tools.sh: unknown argument $arg" ;;
  esac
done

# The tools are not ours to lint: no clippy wrapper from `make test`'s builds.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS

# Without a tool's own release LTO and at opt-level 1 ($TOOL_PROFILE): on 2
# cores LTO made these builds many minutes longer; the tools run for seconds
# either way. (cargo-leptos is not built: scripts/build-console.sh runs its steps.)
TOOL_PROFILE=(CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=1)
# In a target dir of its own, so it may build beside wasm-bindgen-cli.
install_leptosfmt() {
  local version=0.1.33
  if ! "$TOOLS_DIR/bin/leptosfmt" --version 2>/dev/null | grep -q "$version"; then
    log "building leptosfmt $version from crates.io (once)"
    env CARGO_TARGET_DIR="$TOOLS_DIR/build-leptosfmt" "${TOOL_PROFILE[@]}" \
      cargo install leptosfmt --version "=$version" --locked --root "$TOOLS_DIR"
  fi
}
if [ "$only" = leptosfmt ]; then install_leptosfmt; exit 0; fi

# Go for the host cluster's parts (kube-apiserver, etcd, kube-controller-manager
# and kubectl, built from hostcluster/go.mod by scripts/build-control-plane.sh):
# the machine's own when new enough, else the pinned toolchain from the Go proxy.
[ -n "$only" ] || bash scripts/install-go.sh

WASM_BINDGEN_VERSION=$(sed -n 's/^wasm-bindgen = { version = "=\([0-9.]*\)".*/\1/p' Cargo.toml)
: "${WASM_BINDGEN_VERSION:?wasm-bindgen must be pinned with = in Cargo.toml}"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# Builds a crates.io tool from its registry source with one dependency pinned
# back, because `cargo install --locked` picks versions that do not build here.
install_pinned_tool() {
  local crate=$1 version=$2 bin=$3 pin_pkg=$4 pin_version=$5
  if [ -x "$TOOLS_DIR/bin/$bin" ] && "$TOOLS_DIR/bin/$bin" --version 2>/dev/null | grep -q "$version"; then
    return 0
  fi
  log "building $crate $version from crates.io (once; several minutes)"
  local work
  work=$(mktemp -d)
  mkdir -p "$work/fetch/src"
  printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n' \
    "$crate" "$version" > "$work/fetch/Cargo.toml"
  touch "$work/fetch/src/lib.rs"
  (cd "$work/fetch" && cargo fetch -q)
  local srcs=("${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$crate-$version")
  cp -r "${srcs[0]}" "$work/tool"
  (cd "$work/tool" && { [ -f Cargo.lock ] || cargo generate-lockfile -q; } && cargo update -q -p "$pin_pkg" --precise "$pin_version" &&
    env CARGO_TARGET_DIR="$TOOLS_DIR/build" "${TOOL_PROFILE[@]}" \
      cargo install --path . --locked --root "$TOOLS_DIR" --bin "$bin")
  rm -rf "$work"
}

if $wasm_bindgen; then
  install_pinned_tool wasm-bindgen-cli "$WASM_BINDGEN_VERSION" wasm-bindgen webpki-roots 1.0.10
fi
if [ "$only" = wasm-bindgen ]; then exit 0; fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing npm packages from package-lock.json"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund
fi

if $test && $leptosfmt; then install_leptosfmt; fi

if $test; then
  missing=()
  command -v curl >/dev/null || missing+=(curl)
  command -v python3 >/dev/null || missing+=(python3)
  command -v jq >/dev/null || missing+=(jq)
  command -v shellcheck >/dev/null || missing+=(shellcheck)
  command -v chromium >/dev/null || missing+=(chromium)
  [ -d /usr/share/fonts/opentype/noto ] || missing+=(fonts-noto-cjk)
  pg_bin >/dev/null 2>&1 || missing+=(postgresql)
  # The test host's syncer pods: `ip` sets up their network namespaces
  # (`unshare`, `mount` and `chroot` are util-linux and coreutils, always there).
  command -v ip >/dev/null || missing+=(iproute2)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
fi
