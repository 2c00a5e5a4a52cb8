#!/usr/bin/env bash
# The console's Helm chart (charts/kubebyon), with the pinned helm
# (scripts/build-control-plane.sh builds it): `helm lint --strict` with each
# golden case's values; each golden case rendered and compared with its
# `.golden.yaml` (KUBEBYON_BLESS=1 writes them instead); each failing case
# refused at render time with the words its first line names (`# fails: …`).
# The golden files then pass `kubectl apply --dry-run=server` against the
# test host's API server (tests/reconciler.rs::deploy_manifests_pass_the_api_servers_dry_run),
# and values.schema.json is the console's settings (tests/docs.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
chart=charts/kubebyon
helm="${KUBEBYON_CONTROL_PLANE_DIR:-$(bash scripts/build-control-plane.sh --without-syncer | tail -n 1)}/helm"
[ -x "$helm" ] || die "chart-test: no helm at $helm"

step "the chart: helm lint --strict, golden templates, failing cases"
render() { "$helm" template kubebyon "$chart" --namespace kubebyon -f "$1"; }
failed=0
for values in "$chart"/tests/golden/*.values.yaml; do
  golden=${values%.values.yaml}.golden.yaml
  "$helm" lint --strict --quiet "$chart" -f "$values" >/dev/null || { echo "helm lint --strict fails with $values" >&2; failed=1; }
  if [ "${KUBEBYON_BLESS:-}" = 1 ]; then
    render "$values" >"$golden"
  elif ! diff -u "$golden" <(render "$values") >&2; then
    echo "$(basename "$values"): the render differs from $(basename "$golden") (KUBEBYON_BLESS=1 bash scripts/chart-test.sh writes it)" >&2
    failed=1
  fi
  echo "  golden $(basename "$values" .values.yaml): ok" >&2
done
for values in "$chart"/tests/fail/*.values.yaml; do
  want=$(sed -n '1s/^# fails: //p' "$values")
  [ -n "$want" ] || { echo "$values: no '# fails: …' first line" >&2; failed=1; continue; }
  if out=$(render "$values" 2>&1); then
    echo "$(basename "$values"): rendered, but should fail with: $want" >&2; failed=1
  elif ! grep -qF -- "$want" <<<"$out"; then
    echo "$(basename "$values"): failed without saying \"$want\":" >&2; echo "$out" >&2; failed=1
  else
    echo "  fails as it should: $(basename "$values" .values.yaml)" >&2
  fi
done
[ "$failed" -eq 0 ] || die "chart-test: the chart's tests failed (above)"
