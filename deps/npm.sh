#!/usr/bin/env bash
# ONNX Runtime for the ort backend: `npm ci` in src/backends/ort installs the onnxruntime-node release
# its package-lock.json pins into src/backends/ort/node_modules. Does nothing (and needs no network)
# when that release is there. --ignore-scripts: the package's install script would fetch GPU
# providers from outside the npm registry; the CPU library ships inside the package itself.
# Another ORT release: install it anywhere and point QUORUM_ORT_MODULES at its node_modules folder.
set -euo pipefail
dir="$(cd "$(dirname "$0")/../src/backends/ort" && pwd)"
want="$(sed -n 's/.*"onnxruntime-node": *"\([0-9][^"]*\)".*/\1/p' "$dir/package.json" | head -n 1)"
have=""
if [ -f "$dir/node_modules/onnxruntime-node/package.json" ]; then
  have="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/onnxruntime-node/package.json" | head -n 1)"
fi
if [ -n "$want" ] && [ "$have" = "$want" ]; then
  echo "deps: onnxruntime-node $have present"
  exit 0
fi
command -v npm >/dev/null || { echo "deps: npm (Node.js) is needed to install onnxruntime-node $want" >&2; exit 2; }
echo "deps: installing onnxruntime-node $want (npm ci in src/backends/ort)"
cd "$dir"
ONNXRUNTIME_NODE_INSTALL=skip npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
