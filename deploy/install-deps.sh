#!/usr/bin/env bash
# Installs the Debian packages ldpref needs to build, test and run.
# Idempotent: does nothing when every package is already installed.
# Usage: deploy/install-deps.sh [--dev]   (--dev adds fuzzing/benchmark peers)
set -euo pipefail

PKGS=(build-essential pkg-config
      libmicrohttpd-dev libjansson-dev libsodium-dev libsqlite3-dev sqlite3
      libcurl4-openssl-dev libopenblas-dev liblbfgs-dev
      clang libclang-rt-dev gnuplot-nox)
if [ "${1:-}" = "--dev" ]; then
  PKGS+=(python3-numpy python3-scipy)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
