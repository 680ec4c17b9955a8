#!/usr/bin/env bash
# make bench-metrics: the cost of a /metrics scrape and of /v1/stats on a
# database of 10^6 labels, beside the old full-join statistics queries on
# the same file.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_metrics" "$@"
