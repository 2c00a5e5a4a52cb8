#!/usr/bin/env bash
# Makes sure a Go new enough for hostcluster/go.mod is on PATH (scripts/lib.sh
# puts ~/.cache/kubebyon/go/bin first). A machine's own Go is used when it is new
# enough. Otherwise the pinned toolchain is fetched from the Go module proxy as
# the module golang.org/toolchain — the same zip `GOTOOLCHAIN=go1.26.8` would
# fetch, checked against the SHA-256 pinned here. Debian's golang-go (1.19 on
# bookworm) is too old for go.mod and for GOTOOLCHAIN (Go >= 1.21), so it is no
# way in. Idempotent; no release download sites.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

GO_VERSION=1.26.8
declare -A GO_ZIP_SHA256=(
  [linux-amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
)

need=$(awk '$1 == "go" { print $2; exit }' hostcluster/go.mod)
# version_ge A B: A >= B, both like 1.26 or 1.26.8.
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }

have=$(go env GOVERSION 2>/dev/null | sed -n 's/^go\([0-9.]*\).*/\1/p' || true)
if [ -n "$have" ] && version_ge "$have" "$need"; then
  exit 0
fi

case "$(uname -m)" in
  x86_64) platform=linux-amd64 ;;
  *) platform="linux-$(uname -m)" ;;
esac
sha=${GO_ZIP_SHA256[$platform]:-}
if [ -z "$sha" ]; then
  echo "install-go: Go >= $need is needed (found: ${have:-none}); no pinned toolchain for $platform: install it and re-run" >&2
  exit 1
fi

dest="$GO_HOME_DIR"
echo "==> Go ${have:-(none)} < $need: fetching go$GO_VERSION ($platform) from the Go module proxy into $dest" >&2
proxy=$( (go env GOPROXY 2>/dev/null || true) | tr ',|' '\n' | grep -E '^https?://' | head -n 1 || true)
proxy=${proxy:-https://proxy.golang.org}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsSL --retry 3 -o "$work/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.$platform.zip"
echo "$sha  $work/go.zip" | sha256sum -c --quiet -
python3 - "$work/go.zip" "$work/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
root="$work/unpacked/golang.org/toolchain@v0.0.1-go$GO_VERSION.$platform"
# Module zips keep no file modes: the go command marks these executable itself.
chmod +x "$root"/bin/* "$root"/pkg/tool/*/*
rm -rf "$dest.tmp" && mkdir -p "$(dirname "$dest")" && mv "$root" "$dest.tmp"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
"$dest/bin/go" version >&2
