#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, etcd and kubectl from the versions pinned in hostcluster/go.mod
# into ~/.cache/kubebyon/control-plane/<k8s>-etcd<etcd>/ (outside the clone) and
# prints that folder. Skips the build when all binaries are already there.
# Needs Go and the Go module proxy; no release downloads, no container runtime.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/hostcluster"

k8s="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")"
etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")"
if [[ -z "$k8s" || -z "$etcd" ]]; then
  echo "build-control-plane: cannot read versions from $mod/go.mod" >&2
  exit 1
fi

out="${KUBEBYON_CONTROL_PLANE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubebyon/control-plane/$k8s-etcd$etcd}"
if [[ -x "$out/kube-apiserver" && -x "$out/kube-controller-manager" && -x "$out/etcd" && -x "$out/kubectl" ]]; then
  echo "$out"
  exit 0
fi

# Go from scripts/install-go.sh when the machine has none new enough.
GO_HOME_DIR="${GO_HOME_DIR:-$HOME/.cache/kubebyon/go}"
if [[ -x "$GO_HOME_DIR/bin/go" ]]; then export PATH="$GO_HOME_DIR/bin:$PATH"; fi
command -v go >/dev/null || bash "$root/scripts/install-go.sh"
if [[ -x "$GO_HOME_DIR/bin/go" ]]; then export PATH="$GO_HOME_DIR/bin:$PATH"; fi
mkdir -p "$out"
start=$SECONDS
cd "$mod"
# -trimpath and no VCS stamping keep the output independent of the clone path.
# Build into a temporary name and rename, so an interrupted build never looks done.
# Stamp the release into the binary so /version reports it (upstream does this
# through hack/lib/version.sh); without it kube-apiserver says v0.0.0-master.
minor="${k8s#v1.}"; minor="${minor%%.*}"
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
for target in "etcd go.etcd.io/etcd/server/v3" "kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver" \
  "kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager" "kubectl k8s.io/kubernetes/cmd/kubectl"; do
  set -- $target
  [[ -x "$out/$1" ]] && continue
  echo "build-control-plane: building $1 ($k8s / etcd $etcd) into $out" >&2
  nice -n 10 go build -mod=readonly -trimpath -buildvcs=false -ldflags="-s -w$stamp" -o "$out/$1.tmp" "$2"
  mv "$out/$1.tmp" "$out/$1"
done
echo "build-control-plane: done in $((SECONDS - start)) s" >&2
echo "$out"
