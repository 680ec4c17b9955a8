#!/usr/bin/env bash
# make bench-score: policy scoring throughput and latency (4 candidates x 256
# dense features) and single-label ingest with and without a retrain running,
# against the real server with a durable database.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
if [ -f deploy/openblas-env.sh ]; then . deploy/openblas-env.sh; fi
exec "$BUILD/bench/bench_score" "$@"
