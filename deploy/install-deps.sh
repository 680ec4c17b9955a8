#!/usr/bin/env bash
# Installs the Debian packages ldpref needs to build, test and run.
# Idempotent and fast: one dpkg query, and nothing else when every package is
# already installed. Run by `make run`, `make test` and `.ci/run`.
# As root it calls apt-get directly (CI: no terminal, no prompts); otherwise
# through sudo. Without dpkg (not Debian) it installs nothing and says so.
# Usage: deploy/install-deps.sh [--dev]   (--dev adds fuzzing/benchmark peers)
set -euo pipefail

# chromium: the headless browser of the web page test (e2e_ui); xxd: embeds
# the page's files in libldpref at build time; openssl: the certificates of
# the HTTPS test (e2e_tls); libunistring-dev: the memo's Unicode
# normalization (NFKC, white space, case folding) in libldpref. python3 and
# its cffi, pytest, yaml, numpy, pip and setuptools: the Python binding
# (client/python) and its tests (tests/python; pip installs it offline).
# libnghttp2-dev ... libzstd-dev: the libraries libcurl.pc's Libs.private
# names, so that `pkg-config --static --libs ldpref` links (Debian's
# libcurl4-openssl-dev does not pull them in); man-db, groff-base: the
# manual pages' check (tests/install/run.sh). postgresql, libpq-dev: the
# PostgreSQL backend's driver (server/db/sql_pg.c) and the real PostgreSQL
# server its tests start in a temporary directory (tests/support/pg.c; as
# root they run it as the package's own unprivileged user, postgres).
PKGS=(build-essential pkg-config
      libmicrohttpd-dev libjansson-dev libsodium-dev libsqlite3-dev sqlite3
      libcurl4-openssl-dev libopenblas-dev liblbfgs-dev libunistring-dev
      libnghttp2-dev librtmp-dev libssh2-1-dev libpsl-dev libkrb5-dev libldap-dev libzstd-dev
      man-db groff-base
      libncurses-dev tmux
      clang libclang-rt-dev clang-format gnuplot-nox
      xxd chromium openssl
      postgresql libpq-dev
      python3 python3-cffi python3-pytest python3-yaml python3-numpy python3-pip
      python3-setuptools)
if [ "${1:-}" = "--dev" ]; then
  PKGS+=(python3-scipy)
fi

if ! command -v dpkg-query >/dev/null; then
  echo "install-deps: no dpkg-query (not Debian); install by hand: ${PKGS[*]}" >&2
  exit 0
fi
installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${PKGS[@]}" 2>/dev/null \
            | awk '$1 == "ii" { print $2 }' | sed 's/:.*//') || true
missing=()
for p in "${PKGS[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || {
    echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2; exit 1; }
  SUDO=(sudo DEBIAN_FRONTEND=noninteractive)
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
