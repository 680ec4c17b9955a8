#!/usr/bin/env bash
# make bench-startup: the start-up time and resident memory of the server on
# a database of --labels N labels (default 10^7, written with SQL) against
# one without labels.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_startup" "$@"
