#!/usr/bin/env bash
# make bench-ingest: end-to-end ingest throughput and latency against the real
# server with a durable database, beside the raw Ed25519 verification rate.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_ingest" "$@"
