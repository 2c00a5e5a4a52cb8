#!/usr/bin/env bash
# Builds the test host's upstream parts from the versions pinned in hostcluster/**/go.mod
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, helm-controller
# v0.17.9 and v0.17.1, helm 4 and 3, MetalLB's controller, vCluster's OSS syncer, kine and the
# Kubernetes of the chart's distro tag, and netpol-check:
# NetworkPolicy verdicts from cyclonus's matcher)
# into ~/.cache/kubebyon/control-plane/<k8s>-etcd<etcd>/ (outside the clone) and
# prints that folder. Skips the build when all binaries are already there.
# Needs Go and the Go module proxy; no release downloads, no container runtime.
# --without-syncer: all but vCluster's syncer, kine and the distro's Kubernetes
# (`make test` builds them last, beside the Rust test build).
set -euo pipefail
without_syncer=false
if [[ "${1:-}" == --without-syncer ]]; then without_syncer=true; fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$KUBEBYON_ROOT
mod="$root/hostcluster"

k8s="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")"
etcd="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$mod/go.mod")"
if [[ -z "$k8s" || -z "$etcd" ]]; then
  echo "build-control-plane: cannot read versions from $mod/go.mod" >&2
  exit 1
fi

out="${KUBEBYON_CONTROL_PLANE_DIR:-$CONTROL_PLANE_ROOT/$k8s-etcd$etcd}"

# Each target: binary name, module folder (under hostcluster/), package, the version
# that module pins (recorded beside the binary in .<name>.version so a bumped pin
# rebuilds just that binary), the version stamp upstream's own Makefile sets, and
# optionally the build tags and CGO_ENABLED upstream's build uses.
version_of() { awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$mod/$1/go.mod"; }
helm_controller="$(version_of helm-controller github.com/k3s-io/helm-controller)"
helm="$(version_of helm helm.sh/helm/v4)"
# The older generation the test host can run (hostsim --helm-controller v0.17.1):
# helm-controller v0.17.1 and the helm 3 its klipper-helm v0.9 image ships.
helm_controller_old="$(version_of helm-controller-v0.17.1 github.com/k3s-io/helm-controller)"
helm3="$(version_of helm-v3 helm.sh/helm/v3)"
metallb="$(version_of metallb go.universe.tf/metallb)"
vcluster="$(version_of vcluster github.com/loft-sh/vcluster)"
kine="$(version_of kine github.com/k3s-io/kine)"
# Our own small main over cyclonus's matcher: its source's digest joins the pin.
netpol="$(version_of netpol github.com/mattfenwick/cyclonus)-$(sha256sum "$mod/netpol/main.go" | cut -c1-12)"
minor="${k8s#v1.}"; minor="${minor%%.*}"
k8s_stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_stamp+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
targets=(
  "etcd|.|go.etcd.io/etcd/server/v3|$etcd|"
  "kube-apiserver|.|k8s.io/kubernetes/cmd/kube-apiserver|$k8s|$k8s_stamp"
  "kube-controller-manager|.|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s|$k8s_stamp"
  "kube-scheduler|.|k8s.io/kubernetes/cmd/kube-scheduler|$k8s|$k8s_stamp"
  "kubectl|.|k8s.io/kubernetes/cmd/kubectl|$k8s|$k8s_stamp"
  "helm-controller|helm-controller|github.com/k3s-io/helm-controller|$helm_controller| -X github.com/k3s-io/helm-controller/pkg/version.Version=$helm_controller"
  "helm|helm|helm.sh/helm/v4/cmd/helm|$helm| -X helm.sh/helm/v4/internal/version.version=$helm -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  "helm-controller-v0.17.1|helm-controller-v0.17.1|github.com/k3s-io/helm-controller|$helm_controller_old| -X github.com/k3s-io/helm-controller/pkg/version.Version=$helm_controller_old"
  "helm-v3|helm-v3|helm.sh/helm/v3/cmd/helm|$helm3| -X helm.sh/helm/v3/internal/version.version=$helm3 -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  "metallb-controller|metallb|go.universe.tf/metallb/controller|$metallb|"
  "netpol-check|netpol|.|$netpol|"
  # vCluster's Dockerfile: CGO off, the version stamp (its telemetry finds no route out of the sandbox).
  "vcluster|vcluster|github.com/loft-sh/vcluster/cmd/vcluster|$vcluster| -X github.com/loft-sh/vcluster/pkg/telemetry.SyncerVersion=${vcluster#v}||0"
  # kine at the version vCluster v0.30.0's Dockerfile copies into the image
  # (`ARG KINE_VERSION="v0.14.4"`), built as its scripts/build builds it: CGO
  # (SQLite), `-tags nats`, its CGO_CFLAGS.
  "kine|kine|github.com/k3s-io/kine|$kine| -X github.com/k3s-io/kine/pkg/version.Version=$kine|nats|1|-DSQLITE_ENABLE_DBSTAT_VTAB=1 -DSQLITE_USE_ALLOCA=1"
)
# The Kubernetes the chart's `kubernetes` init container copies into a
# vCluster pod (`controlPlane.distro.k8s.image.tag`, v0.30.0's default
# v1.34.0): hostsim's kubelet links `kubernetes-<tag>/` for image
# `ghcr.io/loft-sh/kubernetes:<tag>` (any other tag: ImagePullBackOff).
# Built in vCluster's module graph (its go.mod carries v1.34.0's replace
# block and the three commands as tools) and with CGO off as vCluster is,
# so the packages both use are compiled once (docs/testing.md).
distro="$(version_of vcluster k8s.io/kubernetes)"
distro_tag=v1.34.0
if [[ "$distro" != "$distro_tag" ]]; then
  echo "build-control-plane: hostcluster/vcluster/go.mod selects k8s.io/kubernetes $distro, the chart's distro tag is $distro_tag" >&2
  exit 1
fi
distro_minor="${distro#v1.}"; distro_minor="${distro_minor%%.*}"
distro_stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  distro_stamp+=" -X $pkg.gitVersion=$distro -X $pkg.gitMajor=1 -X $pkg.gitMinor=$distro_minor -X $pkg.gitTreeState=clean"
done
for bin in kube-apiserver kube-controller-manager kube-scheduler; do
  targets+=("kubernetes-$distro/$bin|vcluster|k8s.io/kubernetes/cmd/$bin|$distro|$distro_stamp||0")
done
syncer_part() { [[ "$1" == vcluster || "$1" == kine || "$1" == kubernetes-*/* ]]; }
# The folder's name carries the k8s and etcd versions; the others are stamped.
version_file() { echo "$out/$(dirname "$1")/.$(basename "$1").version"; }
built() { [[ -x "$out/$1" ]] && { [[ "$3" == . ]] || [[ "$(cat "$(version_file "$1")" 2>/dev/null)" == "$2" ]]; }; }
todo=()
for t in "${targets[@]}"; do
  IFS='|' read -r name dir pkg version stamp _ _ <<<"$t"
  if [[ -z "$version" ]]; then
    echo "build-control-plane: no pinned version for $name in $mod/$dir/go.mod" >&2
    exit 1
  fi
  if $without_syncer && syncer_part "$name"; then continue; fi
  built "$name" "$version" "$dir" || todo+=("$t")
done
# Files the test host reads from upstream modules: MetalLB's CRDs, and the vCluster
# chart packaged the way charts.loft.sh serves it (the module zip's chart/ folder says
# version 0.0.1; upstream's release job stamps the tag). Only v0.30.0 is served by the
# proxy here: 0.30.1-0.30.5 are the same chart republished under those versions (their
# values schemas are byte-identical upstream), a stand-in for tests that upgrade.
VCLUSTER_CHART=v0.30.0
CHART_VERSIONS="0.30.0 0.30.1 0.30.2 0.30.3 0.30.4 0.30.5"
# Gateway API CRDs (sigs.k8s.io/gateway-api module zips): the 1.6 standard
# channel, which serves TLSRoute as v1 only, and the 1.4 experimental channel,
# which serves it as v1alpha2 and v1alpha3 only (the console detects which).
GATEWAY_API_BUNDLES="v1.6.3:standard v1.4.1:experimental"
assets_done() {
  [[ -f "$out/metallb-crds/.done-$metallb" ]] || return 1
  for b in $GATEWAY_API_BUNDLES; do [[ -f "$out/gateway-api/${b/:/-}/.done" ]] || return 1; done
  for v in $CHART_VERSIONS; do [[ -f "$out/charts/vcluster-$v.tgz" ]] || return 1; done
}
if [[ ${#todo[@]} -eq 0 ]] && assets_done; then
  echo "$out"
  exit 0
fi

# Go from scripts/install-go.sh when the machine has none new enough.
command -v go >/dev/null || bash "$root/scripts/install-go.sh"
if [[ -x "$GO_HOME_DIR/bin/go" ]]; then export PATH="$GO_HOME_DIR/bin:$PATH"; fi
mkdir -p "$out"
start=$SECONDS
# -trimpath and no VCS stamping keep the output independent of the clone path.
# Build into a temporary name and rename, so an interrupted build never looks done.
# Stamp the release into each binary so it reports its version (upstream does this
# in its Makefile or hack/lib/version.sh); without it kube-apiserver says v0.0.0-master.
for t in "${todo[@]}"; do
  IFS='|' read -r name dir pkg version stamp tags cgo cflags <<<"$t"
  echo "build-control-plane: building $name $version into $out" >&2
  one=$SECONDS
  mkdir -p "$(dirname "$out/$name")"
  # -dwarf=false: the compiler writes no debug info the link (-s -w) would
  # strip anyway — less work for every package on a fresh machine.
  (cd "$mod/$dir" && CGO_ENABLED="${cgo:-$(go env CGO_ENABLED)}" CGO_CFLAGS="${cflags:-$(go env CGO_CFLAGS)}" \
    nice -n 10 go build -mod=readonly -trimpath -buildvcs=false -gcflags=all=-dwarf=false \
    ${tags:+-tags="$tags"} -ldflags="-s -w$stamp" -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo "$version" >"$(version_file "$name")"
  echo "build-control-plane: $name took $((SECONDS - one)) s" >&2
done
module_dir() { go mod download -json "$1" | awk -F'"' '$2 == "Dir" { print $4 }'; }
if ! assets_done; then
  metallb_dir="$(cd "$mod/metallb" && module_dir "go.universe.tf/metallb@$metallb")"
  rm -rf "$out/metallb-crds" && mkdir -p "$out/metallb-crds"
  cp "$metallb_dir"/config/crd/bases/*.yaml "$out/metallb-crds/"
  touch "$out/metallb-crds/.done-$metallb"
  for b in $GATEWAY_API_BUNDLES; do
    dir="$out/gateway-api/${b/:/-}"
    src="$(cd "$mod" && module_dir "sigs.k8s.io/gateway-api@${b%%:*}")/config/crd/${b#*:}"
    rm -rf "$dir" && mkdir -p "$dir"
    # The CRDs only (not kustomization.yaml, nor the channel's admission policy).
    cp "$src"/gateway.networking.k8s.io_*.yaml "$dir/"
    rm -f "$dir"/*vap_safeupgrades.yaml
    touch "$dir/.done"
  done
  chart_dir="$(cd "$mod" && module_dir "github.com/loft-sh/vcluster@$VCLUSTER_CHART")/chart"
  mkdir -p "$out/charts"
  for v in $CHART_VERSIONS; do
    "$out/helm" package "$chart_dir" --version "$v" --app-version "$v" -d "$out/charts" >/dev/null
  done
fi
echo "build-control-plane: done in $((SECONDS - start)) s" >&2
echo "$out"
