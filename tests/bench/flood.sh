#!/usr/bin/env bash
# make bench-flood: single-label ingest alone and under a flood of large
# anonymous /v1/score requests, in the same run against the real server.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_ingest" --batch-annotators 0 --flood-clients 16 "$@"
