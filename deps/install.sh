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
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
