#!/usr/bin/env bash
# make bench-guard: what the rate limits and TLS cost: the bucket table's
# call, the server's CPU for a refused enrollment beside a looked-up one,
# and HTTPS beside plain HTTP (new connections and keep-alive).
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_guard" "$@"
