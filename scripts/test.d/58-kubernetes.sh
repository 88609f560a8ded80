#!/usr/bin/env bash
# dist/kubernetes/*.yaml against the Kubernetes API schemas, offline, with the
# kubernetes-validate package from PyPI (strict: an unknown or misspelt field fails), in a
# virtual environment under target/ (installed once, ~20 s; then ~2 s). The manager's
# configuration inside the ConfigMap is checked by tests/dist.rs.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- dist/kubernetes: schema validation"
start=$(date +%s)
VENV=target/kubernetes-validate
VERSION=1.37.0
if ! "$VENV/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$VERSION"; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$VERSION"
fi
"$VENV/bin/kubernetes-validate" --strict dist/kubernetes/*.yaml
echo "-- dist/kubernetes: schema validation took $(( $(date +%s) - start ))s"
