#!/usr/bin/env bash
# Installs the Debian packages listed in deps/debian.txt that are not installed yet.
# Idempotent: does nothing (and needs no network) when everything is present.
set -euo pipefail
list="$(dirname "$0")/debian.txt"
missing=()
while read -r pkg; do
  pkg="${pkg%%#*}"
  pkg="$(echo "$pkg" | tr -d '[:space:]')"
  [ -z "$pkg" ] && continue
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done <"$list"
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all $(grep -cv '^\s*\(#\|$\)' "$list") packages present"
else
  echo "deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime from the npm registry, at the release src/backends/ort/package-lock.json pins, into
# src/backends/ort/node_modules (the ort backend's runner loads it from there). Skipped when that
# release is installed. ONNXRUNTIME_NODE_INSTALL=skip: the package's install script would otherwise
# try to fetch GPU providers; the CPU library ships inside the package.
bash "$(dirname "$0")/npm.sh"
